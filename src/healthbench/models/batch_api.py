"""Provider batch APIs: OpenAI's Files + Batches (and any OpenAI-compatible server that implements
``/v1/files`` and ``/v1/batches``, such as vLLM's) and Anthropic's Message Batches.

Only the wire formats live here: a request line from the request body the online path sends (built by
the provider adapter, byte for byte the same), submit, poll (one normalized `BatchStatus`), read the
results (by ``custom_id``, never by order) and cancel. Retries of these requests are the model's
(`ManagedModel.call`); what a batch is for, and what happens on failure, is `executors/batching.py`'s.
"""

from __future__ import annotations

import io
import json
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urljoin

import aiohttp

from healthbench.defaults import DEFAULT_BATCH_TRANSFER_TIMEOUT
from healthbench.models.anthropic import AnthropicChatModel, messages_url
from healthbench.models.base import Completion, Messages
from healthbench.models.errors import FailureKind, ProviderError
from healthbench.models.openai import OpenAIChatModel
from healthbench.models.prompt_cache import BATCH_CACHE_TTL
from healthbench.models.transport import HttpProvider

# uploading a batch file (up to 200-256 MB) or downloading its results takes longer than a model call
TRANSFER_TIMEOUT = DEFAULT_BATCH_TRANSFER_TIMEOUT
# a batch's normalized states (OpenAI's names; Anthropic's in_progress/canceling/ended map onto them)
ACTIVE_STATES = ("submitting", "validating", "in_progress", "finalizing", "cancelling")
# ``lost``: the provider answers 404 for the batch (it expired and was purged, was deleted, or belongs
# to another account): none of its requests will ever be answered by it
TERMINAL_STATES = ("completed", "failed", "expired", "cancelled", "lost")


@dataclass(frozen=True)
class BatchStatus:
    """One poll of a provider batch."""

    state: str  # one of ACTIVE_STATES or TERMINAL_STATES
    total: int
    done: int  # answered successfully so far
    failed: int  # errored, expired or cancelled so far
    error: str | None = None  # why a batch failed as a whole
    results_ref: tuple[str | None, ...] = ()  # where its results are (file ids or a results URL)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class RequestFailure:
    """A request of a batch that was not answered: errored, expired or canceled (all retryable)."""

    kind: str
    message: str


BatchOutcome = Completion | RequestFailure


@dataclass(frozen=True)
class BatchLimits:
    max_requests: int
    max_bytes: int


class BatchApi(Protocol):
    limits: BatchLimits

    def body(self, messages: Messages, json_schema: dict[str, Any] | None) -> dict[str, Any]: ...

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def submit(self, lines: Iterable[dict[str, Any]]) -> str: ...

    async def poll(self, batch_id: str) -> BatchStatus: ...

    async def results(self, status: BatchStatus) -> dict[str, BatchOutcome]: ...

    async def cancel(self, batch_id: str) -> None: ...


def lost(batch_id: str) -> BatchStatus:
    """The status of a batch the provider no longer knows (it answered 404)."""
    why = f"the provider no longer knows batch {batch_id} (404: expired, deleted or another account's)"
    return BatchStatus("lost", 0, 0, 0, why)


async def _known(send: Awaitable[str]) -> str | None:
    """The reply to a request about a batch or its results file; None when the provider answers 404 (it
    no longer knows it), which no retry can change."""
    try:
        return await send
    except ProviderError as exc:
        if exc.status == 404:
            return None
        raise


def line_bytes(line: dict[str, Any]) -> int:
    """The size of a request line in a batch file (JSONL, UTF-8, newline included)."""
    return len(json.dumps(line, ensure_ascii=False).encode("utf-8")) + 1


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise ProviderError(FailureKind.TRANSIENT, f"unreadable {what}: {text[:120]!r}") from None


def _jsonl(text: str, what: str) -> list[dict[str, Any]]:
    return [_json(line, what) for line in text.splitlines() if line.strip()]


class OpenAIBatchApi:
    """``POST /files`` (purpose batch) + ``POST /batches`` for ``/v1/chat/completions``."""

    limits = BatchLimits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
    endpoint = "/v1/chat/completions"

    def __init__(self, provider: HttpProvider) -> None:
        self.provider = provider
        self.base = provider.spec.url.rstrip("/")

    def body(self, messages: Messages, json_schema: dict[str, Any] | None) -> dict[str, Any]:
        """The online request's body, byte for byte (the provider adapter builds both)."""
        return self.provider.build_body(messages, json_schema)

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": self.endpoint, "body": body}

    async def submit(self, lines: Iterable[dict[str, Any]]) -> str:
        content = io.BytesIO()  # one copy of the file, written line by line as the lines are made
        for line in lines:
            content.write((json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
        content.seek(0)
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", content, filename="healthbench-batch.jsonl", content_type="application/jsonl")
        reply = await self.provider.send("POST", f"{self.base}/files", data=form, timeout=TRANSFER_TIMEOUT)
        uploaded = _json(reply, "file upload")
        body = {"input_file_id": uploaded["id"], "endpoint": self.endpoint, "completion_window": "24h"}
        created = _json(await self.provider.send("POST", f"{self.base}/batches", json=body), "batch")
        return str(created["id"])

    async def poll(self, batch_id: str) -> BatchStatus:
        reply = await _known(self.provider.send("GET", f"{self.base}/batches/{batch_id}"))
        if reply is None:
            return lost(batch_id)
        data = _json(reply, "batch")
        counts = data.get("request_counts") or {}
        errors = (data.get("errors") or {}).get("data") or []
        error = "; ".join(str(e.get("message") or e.get("code")) for e in errors) or None
        return BatchStatus(
            state=str(data.get("status")),
            total=int(counts.get("total") or 0),
            done=int(counts.get("completed") or 0),
            failed=int(counts.get("failed") or 0),
            error=error,
            results_ref=(data.get("output_file_id"), data.get("error_file_id")),
        )

    async def results(self, status: BatchStatus) -> dict[str, BatchOutcome]:
        out: dict[str, BatchOutcome] = {}
        for file_id in status.results_ref:
            if not file_id:
                continue
            url = f"{self.base}/files/{file_id}/content"
            text = await _known(self.provider.send("GET", url, timeout=TRANSFER_TIMEOUT))
            for entry in _jsonl(text or "", "batch result line"):  # a file gone: its requests are missing
                out[str(entry["custom_id"])] = self._outcome(entry)
        return out

    def _outcome(self, entry: dict[str, Any]) -> BatchOutcome:
        response = entry.get("response") or {}
        if response.get("status_code") == 200 and not entry.get("error"):
            return self.provider.parse(json.dumps(response.get("body")))
        error = entry.get("error") or (response.get("body") or {}).get("error") or {}
        code = str(error.get("code") or error.get("type") or response.get("status_code") or "error")
        kind = "expired" if "expired" in code else "errored"
        return RequestFailure(kind, f"{code}: {error.get('message', '')}".strip(": "))

    async def cancel(self, batch_id: str) -> None:
        await _known(self.provider.send("POST", f"{self.base}/batches/{batch_id}/cancel"))  # 404: gone


_ANTHROPIC_STATES = {"in_progress": "in_progress", "canceling": "cancelling", "ended": "completed"}


class AnthropicBatchApi:
    """``POST /v1/messages/batches`` (``custom_id`` + ``params``), results as JSONL."""

    limits = BatchLimits(max_requests=100_000, max_bytes=256 * 1024 * 1024)

    def __init__(self, provider: AnthropicChatModel) -> None:
        self.provider = provider
        self.base = messages_url(provider.spec.url) + "/batches"

    def body(self, messages: Messages, json_schema: dict[str, Any] | None) -> dict[str, Any]:
        """The online request's body (the provider adapter builds both), its prompt-cache breakpoint
        asking for the 1-hour cache (`BATCH_CACHE_TTL`): a cold batch's requests run for longer than
        the 5-minute cache lives."""
        return self.provider.build_body(messages, json_schema, cache_ttl=BATCH_CACHE_TTL)

    def line(self, custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"custom_id": custom_id, "params": body}

    async def submit(self, lines: Iterable[dict[str, Any]]) -> str:
        body = {"requests": list(lines)}
        created = _json(
            await self.provider.send("POST", self.base, json=body, timeout=TRANSFER_TIMEOUT), "batch"
        )
        return str(created["id"])

    async def poll(self, batch_id: str) -> BatchStatus:
        reply = await _known(self.provider.send("GET", f"{self.base}/{batch_id}"))
        if reply is None:
            return lost(batch_id)
        data = _json(reply, "message batch")
        counts = data.get("request_counts") or {}
        failed = sum(int(counts.get(k) or 0) for k in ("errored", "canceled", "expired"))
        done = int(counts.get("succeeded") or 0)
        total = done + failed + int(counts.get("processing") or 0)
        state = _ANTHROPIC_STATES.get(str(data.get("processing_status")), "in_progress")
        error = None
        if state == "completed" and total and int(counts.get("canceled") or 0) == total:
            state, error = "cancelled", "every request was canceled"
        url = data.get("results_url")
        ref = (urljoin(self.base, url) if url else None,)
        return BatchStatus(state, total, done, failed, error, ref)

    async def results(self, status: BatchStatus) -> dict[str, BatchOutcome]:
        out: dict[str, BatchOutcome] = {}
        for url in status.results_ref:
            if not url:
                continue
            text = await _known(self.provider.send("GET", url, timeout=TRANSFER_TIMEOUT))
            for entry in _jsonl(text or "", "batch result line"):  # results gone: its requests are missing
                result = entry.get("result") or {}
                kind = str(result.get("type"))
                if kind == "succeeded":
                    out[str(entry["custom_id"])] = self.provider.parse(json.dumps(result.get("message")))
                else:
                    error = ((result.get("error") or {}).get("error") or {}).get("message", "")
                    out[str(entry["custom_id"])] = RequestFailure(kind, f"{kind} {error}".strip())
        return out

    async def cancel(self, batch_id: str) -> None:
        await _known(self.provider.send("POST", f"{self.base}/{batch_id}/cancel"))  # 404: gone


def batch_api(provider: Any) -> BatchApi | None:
    """The batch API of a provider adapter, or None when its provider has none (local models)."""
    if isinstance(provider, OpenAIChatModel):
        return OpenAIBatchApi(provider)
    if isinstance(provider, AnthropicChatModel):
        return AnthropicBatchApi(provider)
    return None
