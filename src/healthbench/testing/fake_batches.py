"""The fake server's provider batch APIs: OpenAI's Files + Batches and Anthropic's Message Batches.

A batch moves through its states by the clock (``batch_delay`` seconds from creation to completion:
validating, in progress, finalizing, completed); its answers are the same pure functions of each
request as the online endpoints' (`answer`), so a batch run and an online run agree exactly. Injected
per request (``batch_error_rate``, ``batch_expired_rate``, drawn from an RNG seeded by the server's
seed, the batch id and the request's custom_id, so a resubmitted request gets a new draw) and per
batch (``batch_fail_first``: the first N batches created fail as a whole). Counters: batches created,
requests submitted, and requests submitted again after they had been answered (``repeated``).
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

# (status, JSON body or raw bytes, headers)
Reply = tuple[int, Any, dict[str, str] | None]
# the online endpoints' answers to request bodies processed together: (HTTP status, response body)
# each, billed for the prompt cache as it was before any of them completed
Answer = Callable[[list[dict[str, Any]], bool], list[tuple[int, dict[str, Any]]]]

OPENAI_ENDPOINT = "/v1/chat/completions"


@dataclass
class FakeBatch:
    id: str
    anthropic: bool
    requests: list[dict[str, Any]]  # {"custom_id", "body"}
    created: float
    fail: bool
    cancelled_at: float | None = None
    results: list[dict[str, Any]] | None = None  # per request: {"custom_id", "outcome", "status", "body"}
    files: dict[str, str] = field(default_factory=dict)  # "output"/"error" -> file id


@dataclass(frozen=True)
class BatchSettings:
    delay: float
    error_rate: float
    expired_rate: float
    fail_first: int
    seed: int
    parallel: int = 1  # requests of a batch processed together (0: all of them)


class FakeBatches:
    """The batch endpoints' state (one per fake server app)."""

    def __init__(
        self,
        settings: BatchSettings,
        answer: Answer,
        counts: Counter[str],
        record: Callable[[str, Any], None] = lambda path, body: None,
    ) -> None:
        self.settings = settings
        self.record = record  # keeps each request's body (``record_requests``), as the chat endpoints do
        self.answer = answer
        self.counts = counts
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.answered: set[str] = set()  # custom_ids answered successfully at least once

    # -- shared ------------------------------------------------------------------------------
    def _create(self, requests: list[dict[str, Any]], anthropic: bool) -> FakeBatch:
        n = len(self.batches) + 1
        batch_id = f"msgbatch_fake_{n:06d}" if anthropic else f"batch_fake_{n:06d}"
        self.counts["batches_created"] += 1
        self.counts["batch_requests"] += len(requests)
        self.counts["repeated_batch_requests"] += sum(r["custom_id"] in self.answered for r in requests)
        for r in requests:
            self.record("/v1/messages/batches" if anthropic else "/v1/batches", r["body"])
        batch = FakeBatch(batch_id, anthropic, requests, time.monotonic(), n <= self.settings.fail_first)
        self.batches[batch_id] = batch
        return batch

    def _phase(self, batch: FakeBatch) -> str:
        """validating, in_progress, finalizing, completed, failed or cancelled (by the clock)."""
        if batch.cancelled_at is not None:
            return "cancelled"
        elapsed = time.monotonic() - batch.created
        delay = self.settings.delay
        if elapsed < 0.2 * delay:
            return "validating"
        if batch.fail:
            return "failed"
        if elapsed < 0.8 * delay:
            return "in_progress"
        if elapsed < delay:
            return "finalizing"
        return "completed"

    def _done_share(self, batch: FakeBatch) -> float:
        delay = self.settings.delay
        if delay <= 0:
            return 1.0
        return min(1.0, max(0.0, (time.monotonic() - batch.created - 0.2 * delay) / (0.6 * delay)))

    def _outcome(self, batch: FakeBatch, custom_id: str) -> str:
        """The drawn outcome of one request: succeeded, errored or expired."""
        draw = random.Random(f"{self.settings.seed}:{batch.id}:{custom_id}").random()
        if draw < self.settings.error_rate:
            self.counts["batch_errored"] += 1
            return "errored"
        if draw < self.settings.error_rate + self.settings.expired_rate:
            self.counts["batch_expired"] += 1
            return "expired"
        return "succeeded"

    def _results(self, batch: FakeBatch) -> list[dict[str, Any]]:
        """Each request's result, the requests answered ``parallel`` at a time in file order."""
        if batch.results is None:
            out = []
            size = self.settings.parallel or len(batch.requests)
            for start in range(0, len(batch.requests), size):
                group = [
                    (r, self._outcome(batch, r["custom_id"])) for r in batch.requests[start : start + size]
                ]
                asked = [r["body"] for r, outcome in group if outcome == "succeeded"]
                answers = iter(self.answer(asked, batch.anthropic))
                for request, outcome in group:
                    status, body = next(answers) if outcome == "succeeded" else (0, {})
                    if outcome == "succeeded" and status != 200:
                        outcome = "errored"
                        self.counts["batch_errored"] += 1
                    if outcome == "succeeded":
                        self.answered.add(request["custom_id"])
                    out.append(
                        {
                            "custom_id": request["custom_id"],
                            "outcome": outcome,
                            "status": status,
                            "body": body,
                        }
                    )
            batch.results = out
        return batch.results

    def _counts(self, batch: FakeBatch) -> tuple[int, int, int, int]:
        """(total, succeeded, errored, expired) so far."""
        total = len(batch.requests)
        phase = self._phase(batch)
        if phase in ("completed",):
            results = self._results(batch)
            kinds = Counter(r["outcome"] for r in results)
            return total, kinds["succeeded"], kinds["errored"], kinds["expired"]
        if phase in ("in_progress", "finalizing"):
            return total, int(total * self._done_share(batch)), 0, 0
        return total, 0, 0, 0

    # -- OpenAI -------------------------------------------------------------------------------
    def upload(self, raw: bytes, content_type: str) -> Reply:
        parts = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        content: bytes | None = None
        purpose = None
        for part in parts.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True)
            if name == "file":
                content = payload if isinstance(payload, bytes) else None
            elif name == "purpose" and isinstance(payload, bytes):
                purpose = payload.decode()
        if content is None or purpose != "batch":
            return (
                400,
                {"error": {"message": "need a 'file' and purpose=batch", "type": "invalid_request_error"}},
                None,
            )
        file_id = f"file-fake-{len(self.files) + 1:06d}"
        self.files[file_id] = content
        self.counts["batch_files"] += 1
        return 200, {"id": file_id, "object": "file", "bytes": len(content), "purpose": "batch"}, None

    def file_content(self, file_id: str) -> Reply:
        if file_id not in self.files:
            return 404, {"error": {"message": f"no file {file_id}", "type": "not_found"}}, None
        return 200, self.files[file_id], {"content-type": "application/jsonl"}

    def create_openai(self, body: dict[str, Any]) -> Reply:
        content = self.files.get(str(body.get("input_file_id")))
        if content is None or body.get("endpoint") != OPENAI_ENDPOINT:
            return (
                400,
                {"error": {"message": "unknown input_file_id or endpoint", "type": "invalid_request_error"}},
                None,
            )
        requests = []
        for line in content.decode().splitlines():
            if line.strip():
                entry = json.loads(line)
                if entry.get("url") != OPENAI_ENDPOINT or entry.get("method") != "POST":
                    return (
                        400,
                        {"error": {"message": "bad request line", "type": "invalid_request_error"}},
                        None,
                    )
                requests.append({"custom_id": entry["custom_id"], "body": entry["body"]})
        if len({r["custom_id"] for r in requests}) != len(requests):
            return 400, {"error": {"message": "duplicate custom_id", "type": "invalid_request_error"}}, None
        batch = self._create(requests, anthropic=False)
        return 200, self._openai_object(batch), None

    def get_openai(self, batch_id: str) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None or batch.anthropic:
            return 404, {"error": {"message": f"no batch {batch_id}", "type": "not_found"}}, None
        return 200, self._openai_object(batch), None

    def cancel(self, batch_id: str) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, {"error": {"message": f"no batch {batch_id}", "type": "not_found"}}, None
        if self._phase(batch) not in ("completed", "failed"):
            batch.cancelled_at = time.monotonic()
            self.counts["batches_cancelled"] += 1
        obj = self._anthropic_object(batch) if batch.anthropic else self._openai_object(batch)
        return 200, obj, None

    def _openai_object(self, batch: FakeBatch) -> dict[str, Any]:
        phase = self._phase(batch)
        total, ok, errored, expired = self._counts(batch)
        obj: dict[str, Any] = {
            "id": batch.id, "object": "batch", "endpoint": OPENAI_ENDPOINT, "errors": None,
            "completion_window": "24h", "status": phase, "output_file_id": None, "error_file_id": None,
            "created_at": int(batch.created), "metadata": None,
            "request_counts": {"total": total, "completed": ok, "failed": errored + expired},
        }  # fmt: skip
        if phase == "failed":
            obj["errors"] = {
                "object": "list",
                "data": [{"code": "fake_failure", "message": "batch failed (fake)"}],
            }
        if phase == "completed" and not batch.files:
            outputs, errors = [], []
            for r in self._results(batch):
                if r["outcome"] == "succeeded":
                    line = {"id": f"req_{r['custom_id'][:12]}", "custom_id": r["custom_id"],
                            "response": {"status_code": 200, "request_id": "fake", "body": r["body"]},
                            "error": None}  # fmt: skip
                    outputs.append(line)
                elif r["outcome"] == "errored":
                    failure = {"error": {"message": "server error (fake)", "type": "server_error"}}
                    response = {"status_code": 500, "request_id": "fake", "body": failure}
                    errors.append({"custom_id": r["custom_id"], "response": response, "error": None})
                else:
                    gone = {"code": "batch_expired", "message": "expired (fake)"}
                    errors.append({"custom_id": r["custom_id"], "response": None, "error": gone})
            for kind, lines in (("output", outputs), ("error", errors)):
                if lines:
                    file_id = f"file-fake-{len(self.files) + 1:06d}"
                    self.files[file_id] = "".join(json.dumps(x) + "\n" for x in lines).encode()
                    batch.files[kind] = file_id
        obj["output_file_id"] = batch.files.get("output")
        obj["error_file_id"] = batch.files.get("error")
        return obj

    # -- Anthropic ----------------------------------------------------------------------------
    def create_anthropic(self, body: dict[str, Any]) -> Reply:
        raw = body.get("requests")
        if not isinstance(raw, list) or not raw:
            return (
                400,
                {"type": "error", "error": {"type": "invalid_request_error", "message": "requests"}},
                None,
            )
        requests = [{"custom_id": r["custom_id"], "body": r["params"]} for r in raw]
        batch = self._create(requests, anthropic=True)
        return 200, self._anthropic_object(batch), None

    def get_anthropic(self, batch_id: str) -> Reply:
        batch = self.batches.get(batch_id)
        if batch is None or not batch.anthropic:
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": batch_id}}, None
        return 200, self._anthropic_object(batch), None

    def anthropic_results(self, batch_id: str) -> Reply:
        batch = self.batches.get(batch_id)
        if (
            batch is None
            or not batch.anthropic
            or self._phase(batch) not in ("completed", "failed", "cancelled")
        ):
            return 404, {"type": "error", "error": {"type": "not_found_error", "message": batch_id}}, None
        lines = []
        if self._phase(batch) == "completed":
            for r in self._results(batch):
                if r["outcome"] == "succeeded":
                    result: dict[str, Any] = {"type": "succeeded", "message": r["body"]}
                elif r["outcome"] == "errored":
                    result = {
                        "type": "errored",
                        "error": {"type": "error", "error": {"type": "api_error", "message": "fake"}},
                    }
                else:
                    result = {"type": "expired"}
                lines.append({"custom_id": r["custom_id"], "result": result})
        else:  # failed as a whole or cancelled: every request canceled
            lines = [{"custom_id": r["custom_id"], "result": {"type": "canceled"}} for r in batch.requests]
        return (
            200,
            "".join(json.dumps(x) + "\n" for x in lines).encode(),
            {"content-type": "application/jsonl"},
        )

    def _anthropic_object(self, batch: FakeBatch) -> dict[str, Any]:
        phase = self._phase(batch)
        total, ok, errored, expired = self._counts(batch)
        ended = phase in ("completed", "failed", "cancelled")
        canceled = total if phase in ("failed", "cancelled") else 0
        status = {"validating": "in_progress", "finalizing": "in_progress"}.get(phase, phase)
        return {
            "id": batch.id, "type": "message_batch",
            "processing_status": "ended" if ended else status,
            "request_counts": {"processing": 0 if ended else total - ok, "succeeded": ok,
                               "errored": errored, "canceled": canceled, "expired": expired},
            "created_at": int(batch.created), "ended_at": None, "expires_at": None,
            "cancel_initiated_at": None,
            "results_url": f"/v1/messages/batches/{batch.id}/results" if ended else None,
        }  # fmt: skip
