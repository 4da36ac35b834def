"""Today's tables of provider batches (``--batch``), as migrations 0006 and 0010 leave them:
each batch a run submitted (its provider id, state and counts) and its requests, whose ``custom_id``
(the call's cache key) maps back to (run, conversation, repeat, criterion, attempt) here, never by
the order of a batch's lines."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Integer, MetaData, String, Table, Text

batch_metadata = MetaData()

provider_batches = Table(
    "provider_batches",
    batch_metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, nullable=False, index=True),  # runs.id (ON DELETE CASCADE in the migration)
    Column("role", String(20), nullable=False),  # candidate or judge
    Column("provider", String(40), nullable=False),
    Column("batch_id", String(200)),  # the provider's id; None until the provider has created it
    Column("state", String(20), nullable=False),  # submitting, validating, ..., completed, failed
    Column("total", Integer, nullable=False),
    Column("done", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("resubmit_of", Integer),  # the batch that failed as a whole and is submitted again here
    Column("error", Text),
    Column("created_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
)

batch_requests = Table(
    "batch_requests",
    batch_metadata,
    Column("batch", Integer, ForeignKey("provider_batches.id", ondelete="CASCADE"), primary_key=True),
    Column("custom_id", String(64), primary_key=True),  # the call's cache key
    Column("run_id", Integer, nullable=False),
    Column("item_id", String(300), nullable=False),
    Column("repeat", Integer, nullable=False),
    Column("criterion", Integer, nullable=False),  # -1: the candidate's answer
    Column("attempt", Integer, nullable=False),
    Column("judge", String(200), nullable=False, server_default=""),  # the member asked; '': the candidate
)
