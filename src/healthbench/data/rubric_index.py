"""A dataset read for joining, not for running: prompt_id -> example tags and rubric, as the one JSONL
reader (`healthbench.data.jsonl`) decodes them, without building `Conversation` records (nor loading
pydantic). Errors are the reader's: file, line and field."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from healthbench.data.jsonl import join_by_prompt_id, read_eval
from healthbench.data.shapes import RubricEntry


@dataclass(frozen=True)
class IndexedConversation:
    """A conversation's example tags and its rubric, as decoded (read with `CRITERION`, `POINTS`,
    `TAGS` of `healthbench.data.shapes`)."""

    example_tags: tuple[str, ...]
    rubric: list[RubricEntry]


def read_rubric_index(paths: Sequence[str | os.PathLike[str]]) -> dict[str, IndexedConversation]:
    """Every conversation of the JSONL files (either format) by prompt_id; a prompt_id in several
    files must have the same rubric in each (`join_by_prompt_id`)."""
    joined = join_by_prompt_id([(str(path), read_eval(path)[1]) for path in paths])
    return {pid: IndexedConversation(tuple(line.example_tags), line.rubrics) for pid, line in joined.items()}
