"""A deterministic OpenAI- and Anthropic-compatible fake model server, with latency and injected faults.

Answers are pure functions of the request (`fake_answer`, `fake_judge_verdict`: the truth `fake_verdict`,
flipped at a known rate for judge models named ``-errNN``), so tests and benchmarks can compute the
expected results independently. Faults and latency jitter come from a seeded RNG owned by
the app, per request, so a retried request eventually succeeds.

    with running_fake_server(FakeServerConfig(latency=0.5)) as url:  # url ends in /v1
        ...
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import uvicorn
from pydantic import BaseModel, ConfigDict, Field

from healthbench.testing.fake_batches import BatchSettings, FakeBatches
from healthbench.testing.fake_prompt_cache import CacheBill, FakePromptCache

FaultKind = Literal["rate_limit", "server_error", "unavailable", "garbage", "slow"]
FAULT_KINDS: tuple[FaultKind, ...] = ("rate_limit", "server_error", "unavailable", "garbage", "slow")
JUDGE_MARKER = "criteria_met"
GARBAGE_TEXT = "I think the criterion is probably satisfied, although it is hard to say for sure."
_VOCAB = (
    "rest", "fluids", "symptoms", "doctor", "monitor", "dose", "urgent", "care", "advice", "follow-up",
    "history", "risk", "sleep", "diet", "pain", "fever", "clinic", "check", "safety", "warning",
)  # fmt: skip


class FaultMix(BaseModel):
    """Relative weights of the injected faults (only their ratios matter)."""

    model_config = ConfigDict(extra="forbid")

    rate_limit: float = Field(default=1.0, ge=0)  # 429 with a Retry-After header
    server_error: float = Field(default=1.0, ge=0)  # 500
    unavailable: float = Field(default=1.0, ge=0)  # 503 (529 "overloaded" on /v1/messages)
    garbage: float = Field(default=1.0, ge=0)  # 200 with non-JSON text; judge calls only
    slow: float = Field(default=0.0, ge=0)  # answer only after slow_seconds (to exceed a client timeout)


class FakeServerConfig(BaseModel):
    """Behaviour of the fake server. Unknown fields are rejected."""

    model_config = ConfigDict(extra="forbid")

    latency: float = Field(default=0.0, ge=0)
    latency_jitter: float = Field(default=0.0, ge=0)
    fault_rate: float = Field(default=0.0, ge=0, le=1)
    faults: FaultMix = Field(default_factory=FaultMix)
    retry_after: float = Field(default=1.0, ge=0)
    slow_seconds: float = Field(default=30.0, ge=0)
    met_rate: float = Field(default=0.5, ge=0, le=1)
    seed: int = 0
    require_api_key: str | None = None
    quota_exhausted: bool = False
    models: list[str] = Field(default_factory=lambda: ["fake-model"])
    # requests whose last user message contains one of these always fail with a 500 (one item failing)
    fail_containing: list[str] = Field(default_factory=list)
    # opt-in: keep the JSON bodies of the last N chat requests (GET /requests, `fetch_requests`)
    record_requests: int = Field(default=0, ge=0)
    # provider batch APIs (testing/fake_batches.py): seconds from a batch's creation to its completion,
    # shares of its requests that come back errored or expired, and how many of the first batches
    # created fail as a whole
    batch_delay: float = Field(default=0.0, ge=0)
    batch_error_rate: float = Field(default=0.0, ge=0, le=1)
    batch_expired_rate: float = Field(default=0.0, ge=0, le=1)
    batch_fail_first: int = Field(default=0, ge=0)
    # bill prompt caching as the providers do (testing/fake_prompt_cache.py); batches too, their
    # requests taken in file order, each completing before the next
    prompt_cache: bool = False
    # candidate answers of about this many words (0: 8-24 words), since reply length decides the
    # prefix a conversation's judge prompts share
    reply_words: int = Field(default=0, ge=0)


# ---------------------------------------------------------------- deterministic answers


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI / Anthropic content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def normalize_messages(messages: list[dict[str, Any]], system: Any = None) -> list[dict[str, str]]:
    """``[{"role", "content"}]`` with text content; an Anthropic top-level `system` becomes message 0."""
    out = [{"role": "system", "content": _content_text(system)}] if system else []
    out += [{"role": str(m.get("role", "")), "content": _content_text(m.get("content"))} for m in messages]
    return out


def last_user_text(messages: list[dict[str, str]]) -> str:
    for message in reversed(messages):
        if message["role"] == "user":
            return message["content"]
    return messages[-1]["content"] if messages else ""


def is_judge_request(messages: list[dict[str, str]]) -> bool:
    """A judge call is one whose last user message mentions ``criteria_met``."""
    return JUDGE_MARKER in last_user_text(messages)


def count_words(text: str) -> int:
    """The fake token count: whitespace-separated words."""
    return len(text.split())


def fake_answer(messages: list[dict[str, str]], reply_words: int = 0) -> str:
    """The candidate answer: ``Fake answer <8 hex>: <8-24 words>`` from sha256 of the messages' JSON;
    with ``reply_words``, continued to 80-120% of that many words (drawn from the same digest)."""
    canonical = json.dumps(
        normalize_messages(messages), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    digest = bytes.fromhex(_sha256(canonical))
    words = [_VOCAB[b % len(_VOCAB)] for b in digest[1 : 9 + digest[0] % 17]]
    if reply_words:
        target = reply_words * (80 + digest[0] % 41) // 100
        stream = digest
        while len(words) + 3 < target:
            stream = hashlib.sha256(stream).digest()
            words.extend(_VOCAB[b % len(_VOCAB)] for b in stream[: target - len(words) - 3])
    return f"Fake answer {digest[:4].hex()}: " + " ".join(words) + "."


def fake_verdict(judge_prompt: str, met_rate: float = 0.5) -> bool:
    """criteria_met for a judge prompt (`judge_prompt`): sha256 mapped to [0, 1) below `met_rate`. This is
    the fake's *truth*: what every judge answers, except judges with known error rates (`judge_errors`)."""
    return int(_sha256(judge_prompt)[:13], 16) / 16**13 < met_rate


@dataclass(frozen=True)
class JudgeErrors:
    """The errors of a judge model named ``<name>-errNN``: it flips the truth with probability ``rate``.
    In a family (``family-<F>-...``) a member uses the family's draw with probability ``shared`` (given
    as ``-sharedSS`` before ``-errNN``; 100 % when absent), its own otherwise."""

    rate: float
    family: str | None = None
    shared: float = 0.0


_ERROR_NAME = re.compile(r"(?P<name>.+?)(?:-shared(?P<shared>\d{1,3}))?-err(?P<rate>\d{1,3})")
_FAMILY_NAME = re.compile(r"family-(?P<family>[a-z0-9]+)(?:-|$)")


def judge_errors(model: str) -> JudgeErrors | None:
    """The known error rates a judge model name asks for (docs/models.md), None for an exact judge."""
    match = _ERROR_NAME.fullmatch(model)
    if match is None or int(match["rate"]) > 100:
        return None
    family = _FAMILY_NAME.match(match["name"])
    if family is None:
        return JudgeErrors(int(match["rate"]) / 100)
    shared = 100 if match["shared"] is None else min(int(match["shared"]), 100)
    return JudgeErrors(int(match["rate"]) / 100, family["family"], shared / 100)


def _unit(*parts: str) -> float:
    """A uniform draw in [0, 1) from sha256 of the parts (NUL-separated)."""
    return int(_sha256("\0".join(parts))[:13], 16) / 16**13


def judge_flips(judge_prompt: str, model: str) -> bool:
    """Whether judge `model` flips the truth on `judge_prompt`: its error draw (the family's, with
    probability ``shared``, else its own; each a hash of its name and the prompt) below its rate."""
    errors = judge_errors(model)
    if errors is None:
        return False
    own = errors.family is None or _unit("share", model, judge_prompt) >= errors.shared
    draw = _unit("own", model, judge_prompt) if own else _unit("family", str(errors.family), judge_prompt)
    return draw < errors.rate


def fake_judge_verdict(judge_prompt: str, model: str = "", met_rate: float = 0.5) -> bool:
    """What judge `model` answers on `judge_prompt`: the truth (`fake_verdict`), flipped by its errors."""
    return fake_verdict(judge_prompt, met_rate) != judge_flips(judge_prompt, model)


def truth_verdict(messages: list[dict[str, Any]], met_rate: float = 0.5) -> bool:
    """The truth of a judge request (its ``messages``, OpenAI-shaped), whichever judge is asked."""
    return fake_verdict(judge_prompt(normalize_messages(messages)), met_rate)


def fake_judge_text(judge_prompt: str, met_rate: float = 0.5, model: str = "") -> str:
    """Judge `model`'s reply: JSON, wrapped in a ```json fence for about one prompt in four."""
    digest = _sha256(judge_prompt)
    met = fake_judge_verdict(judge_prompt, model, met_rate)
    body = json.dumps(
        {
            "explanation": f"Fake judge {digest[:8]}: criterion {'met' if met else 'not met'}.",
            "criteria_met": met,
        }
    )
    return f"```json\n{body}\n```" if int(digest[13], 16) % 4 == 0 else body


def judge_prompt(messages: list[dict[str, str]]) -> str:
    """The judge prompt a verdict is drawn from: the user messages' text joined by blank lines (a
    cache-first prompt is sent as two user messages; `GraderTemplate.render` joins them alike)."""
    return "\n\n".join(m["content"] for m in messages if m["role"] == "user")


def fake_reply(
    messages: list[dict[str, str]], met_rate: float = 0.5, reply_words: int = 0, model: str = ""
) -> str:
    """What the server answers (without faults) to `messages` sent to `model`."""
    if is_judge_request(messages):
        return fake_judge_text(judge_prompt(messages), met_rate, model)
    return fake_answer(messages, reply_words)


# ---------------------------------------------------------------- state and app


class FakeServerState:
    """Counters and the seeded RNG of one app (no module globals: each app has its own)."""

    def __init__(self, config: FakeServerConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.counts: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: deque[dict[str, Any]] = deque(maxlen=config.record_requests or None)
        settings = BatchSettings(
            config.batch_delay,
            config.batch_error_rate,
            config.batch_expired_rate,
            config.batch_fail_first,
            config.seed,
        )
        self.prompt_cache = FakePromptCache()
        self.batches = FakeBatches(settings, self.batch_answer, self.counts, self.record)

    def batch_answer(self, body: dict[str, Any], anthropic: bool) -> tuple[int, dict[str, Any]]:
        """A batched request's answer, billed as the online one's."""
        cache = self.prompt_cache if self.config.prompt_cache else None
        status, reply = answer(self.config, body, anthropic, cache)
        if status == 200:
            messages = normalize_messages(body["messages"], body.get("system") if anthropic else None)
            _count_billed(self.counts, reply, anthropic, is_judge_request(messages))
        return status, reply

    def record(self, path: str, body: Any) -> None:
        """Keep a chat request's body (bounded by ``record_requests``; nothing when it is 0)."""
        if self.config.record_requests:
            self.requests.append({"path": path, "body": body})

    def begin(self) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(self) -> None:
        self.in_flight -= 1

    def delay(self) -> float:
        jitter = self.rng.uniform(0.0, self.config.latency_jitter) if self.config.latency_jitter else 0.0
        return self.config.latency + jitter

    def draw_fault(self, judge: bool) -> FaultKind | None:
        if self.config.fault_rate <= 0 or self.rng.random() >= self.config.fault_rate:
            return None
        mix = self.config.faults
        weights = [getattr(mix, kind) if judge or kind != "garbage" else 0.0 for kind in FAULT_KINDS]
        if sum(weights) <= 0:
            return None
        fault = self.rng.choices(FAULT_KINDS, weights)[0]
        self.counts[f"fault_{fault}"] += 1
        return fault

    def reset(self) -> None:
        """Counters, recorded requests, the batches' answered ids and the prompt cache start over."""
        self.counts.clear()
        self.requests.clear()
        self.batches.answered.clear()
        self.prompt_cache.clear()
        self.max_in_flight = self.in_flight

    def stats(self) -> dict[str, Any]:
        c = self.counts
        faults = {kind: c[f"fault_{kind}"] for kind in FAULT_KINDS}
        return {
            "requests": c["requests"],
            "candidate": c["candidate"],
            "judge": c["judge"],
            "chat_completions": c["chat_completions"],
            "messages": c["messages"],
            "models": c["models"],
            "faults": faults,
            "faults_total": sum(faults.values()),
            "unauthorized": c["unauthorized"],
            "quota_exhausted": c["quota_exhausted"],
            "bad_requests": c["bad_requests"],
            "batches_created": c["batches_created"],
            "batch_requests": c["batch_requests"],
            "repeated_batch_requests": c["repeated_batch_requests"],
            "batch_errored": c["batch_errored"],
            "batch_expired": c["batch_expired"],
            "batches_cancelled": c["batches_cancelled"],
            # what was billed (every answered request, online and batched), per role, by kind of token
            "billed": {
                role: {
                    kind: c[f"billed_{role}_{kind}"]
                    for kind in (
                        "input_tokens",
                        "cached_input_tokens",
                        "cache_write_input_tokens",
                        "output_tokens",
                    )
                }
                for role in ("candidate", "judge")
            },
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
        }


Reply = tuple[int, Any, dict[str, str] | None]  # a JSON body, or raw bytes (a JSONL file)


def _openai_error(status: int, message: str, code: str, headers: dict[str, str] | None = None) -> Reply:
    return status, {"error": {"message": message, "type": code, "code": code}}, headers


def _anthropic_error(status: int, message: str, code: str, headers: dict[str, str] | None = None) -> Reply:
    return status, {"type": "error", "error": {"type": code, "message": message}}, headers


def _retry_after_header(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


async def _serve_chat(
    state: FakeServerState, raw_body: bytes, headers: dict[str, str], *, anthropic: bool
) -> Reply:
    """The shared path of both chat endpoints: parse, count, check, wait, maybe fail, answer."""
    error = _anthropic_error if anthropic else _openai_error
    state.counts["requests"] += 1
    state.counts["messages" if anthropic else "chat_completions"] += 1
    try:
        body = json.loads(raw_body)
        state.record("/v1/messages" if anthropic else "/v1/chat/completions", body)
        messages = normalize_messages(body["messages"], body.get("system") if anthropic else None)
    except (ValueError, KeyError, TypeError, AttributeError):
        state.counts["bad_requests"] += 1
        return error(400, "request body must be JSON with a 'messages' list", "invalid_request_error")
    judge = is_judge_request(messages)
    state.counts["judge" if judge else "candidate"] += 1

    config = state.config
    if config.require_api_key is not None:
        sent = headers.get("x-api-key") if anthropic else headers.get("authorization")
        if sent not in (config.require_api_key, f"Bearer {config.require_api_key}"):
            state.counts["unauthorized"] += 1
            return error(401, "Incorrect API key provided.", "authentication_error")
    if config.quota_exhausted:
        state.counts["quota_exhausted"] += 1
        return error(429, "You exceeded your current quota.", "insufficient_quota")

    if any(marker in last_user_text(messages) for marker in config.fail_containing):
        state.counts["fault_server_error"] += 1
        return error(500, "Internal server error (fake, --fail-containing).", "api_error")
    cache = state.prompt_cache if config.prompt_cache else None
    bill = _cache_bill(cache, body, messages, anthropic)  # what completed before this one arrived
    fault = state.draw_fault(judge)
    await asyncio.sleep(state.delay())
    if fault == "rate_limit":
        retry = {"retry-after": _retry_after_header(config.retry_after)}
        return error(429, "Rate limit reached (fake).", "rate_limit_error", retry)
    if fault == "server_error":
        return error(500, "Internal server error (fake).", "api_error")
    if fault == "unavailable":
        return error(529 if anthropic else 503, "Overloaded (fake).", "overloaded_error")
    if fault == "slow":
        await asyncio.sleep(config.slow_seconds)

    model = str(body.get("model", ""))
    text = (
        GARBAGE_TEXT
        if fault == "garbage"
        else fake_reply(messages, config.met_rate, config.reply_words, model)
    )
    reply = _reply_body(text, messages, body, config, anthropic, bill)
    if cache is not None:
        cache.complete(bill)
    _count_billed(state.counts, reply, anthropic, judge)
    return 200, reply, None


def _cache_bill(
    cache: FakePromptCache | None, body: dict[str, Any], messages: list[dict[str, str]], anthropic: bool
) -> CacheBill:
    if cache is None:
        return CacheBill()
    return cache.anthropic(body) if anthropic else cache.openai(str(body.get("model", "")), messages)


def _count_billed(counts: Counter[str], reply: dict[str, Any], anthropic: bool, judge: bool) -> None:
    """Add an answer's usage to the billed totals of its role (``/stats``: ``billed``); input counts
    every input token, cached and written ones included, as healthbench's `Usage` does."""
    usage = reply["usage"]
    if anthropic:
        read, write = usage.get("cache_read_input_tokens", 0), usage.get("cache_creation_input_tokens", 0)
        total, output = usage["input_tokens"] + read + write, usage["output_tokens"]
    else:
        read, write = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0), 0
        total, output = usage["prompt_tokens"], usage["completion_tokens"]
    role = "judge" if judge else "candidate"
    counts[f"billed_{role}_input_tokens"] += total
    counts[f"billed_{role}_cached_input_tokens"] += read
    counts[f"billed_{role}_cache_write_input_tokens"] += write
    counts[f"billed_{role}_output_tokens"] += output


def _reply_body(
    text: str,
    messages: list[dict[str, str]],
    body: dict[str, Any],
    config: FakeServerConfig,
    anthropic: bool,
    bill: CacheBill | None = None,
) -> dict[str, Any]:
    prompt_tokens = sum(count_words(m["content"]) for m in messages)
    output_tokens = count_words(text)
    model = str(body.get("model") or config.models[0])
    reply_id = _sha256(text)[:12]
    bill = bill or CacheBill()
    if anthropic:
        usage: dict[str, Any] = {"input_tokens": prompt_tokens, "output_tokens": output_tokens}
        if config.prompt_cache:
            usage["input_tokens"] = prompt_tokens - bill.read - bill.write
            usage["cache_read_input_tokens"] = bill.read
            usage["cache_creation_input_tokens"] = bill.write
        return {
            "id": f"msg_fake_{reply_id}", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "usage": usage,
        }  # fmt: skip
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": output_tokens,
             "total_tokens": prompt_tokens + output_tokens}  # fmt: skip
    if config.prompt_cache:
        usage["prompt_tokens_details"] = {"cached_tokens": bill.read}
    return {
        "id": f"chatcmpl-fake-{reply_id}", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage,
    }  # fmt: skip


def answer(
    config: FakeServerConfig, body: dict[str, Any], anthropic: bool, cache: FakePromptCache | None = None
) -> tuple[int, dict[str, Any]]:
    """The answer (no fault, no latency) to one request body, as a batch gives it: the same reply as
    the online endpoint's (with ``cache``, billed for the prompt cache, the request completing at once)."""
    try:
        messages = normalize_messages(body["messages"], body.get("system") if anthropic else None)
    except (KeyError, TypeError, AttributeError):
        return 400, {
            "error": {"message": "request body needs a 'messages' list", "type": "invalid_request_error"}
        }
    if any(marker in last_user_text(messages) for marker in config.fail_containing):
        return 500, {
            "error": {"message": "Internal server error (fake, --fail-containing).", "type": "api_error"}
        }
    bill = _cache_bill(cache, body, messages, anthropic)
    text = fake_reply(messages, config.met_rate, config.reply_words, str(body.get("model", "")))
    reply = _reply_body(text, messages, body, config, anthropic, bill)
    if cache is not None:
        cache.complete(bill)
    return 200, reply


class FakeServerApp:
    """The fake server as a bare ASGI application (no framework: at ~1,500 requests/s on a shared
    core, per-request overhead is what limits a benchmark). ``state`` holds its counters."""

    def __init__(self, config: FakeServerConfig | None = None) -> None:
        self.state = FakeServerState(config or FakeServerConfig())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"].rstrip("/")
        chunks: list[bytes] = []  # joined once: a batch file upload can be hundreds of MB
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        reply = await self._route(method, path, raw, scope)
        status, body, headers = reply
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        extra = dict(headers or {})
        content_type = extra.pop("content-type", "application/json")
        out = [(b"content-type", content_type.encode()), (b"content-length", str(len(payload)).encode())]
        out += [(k.encode(), v.encode()) for k, v in extra.items()]
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": payload})

    async def _route(self, method: str, path: str, raw: bytes, scope: dict[str, Any]) -> Reply:
        state = self.state
        if method == "POST" and path in ("/v1/chat/completions", "/v1/messages"):
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            state.begin()
            try:
                return await _serve_chat(state, raw, headers, anthropic=path == "/v1/messages")
            finally:
                state.end()
        if path.startswith(("/v1/files", "/v1/batches", "/v1/messages/batches")):
            return self._batch_route(method, path, raw, scope)
        if method == "GET" and path == "/v1/models":
            state.counts["models"] += 1
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "healthbench-fake"}
                for m in state.config.models
            ]
            return 200, {"object": "list", "data": data}, None
        if method == "GET" and path == "/requests":
            return 200, {"requests": list(state.requests)}, None
        if method == "GET" and path == "/stats":
            return 200, state.stats(), None
        if method == "POST" and path == "/stats/reset":
            state.reset()
            return 200, state.stats(), None
        return 404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}}, None

    def _batch_route(self, method: str, path: str, raw: bytes, scope: dict[str, Any]) -> Reply:
        batches = self.state.batches
        parts = path.strip("/").split("/")  # v1, files|batches|messages, ...
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        key = self.state.config.require_api_key
        if key is not None and key not in (headers.get("x-api-key"), headers.get("authorization", "")[7:]):
            self.state.counts["unauthorized"] += 1
            return (
                401,
                {"error": {"message": "Incorrect API key provided.", "type": "authentication_error"}},
                None,
            )
        try:
            if parts[1] == "files":
                if method == "POST" and len(parts) == 2:
                    return batches.upload(raw, headers.get("content-type", ""))
                if method == "GET" and len(parts) == 4 and parts[3] == "content":
                    return batches.file_content(parts[2])
            elif parts[1] == "batches":
                if method == "POST" and len(parts) == 2:
                    return batches.create_openai(json.loads(raw))
                if method == "GET" and len(parts) == 3:
                    return batches.get_openai(parts[2])
                if method == "POST" and len(parts) == 4 and parts[3] == "cancel":
                    return batches.cancel(parts[2])
            else:  # messages/batches
                if method == "POST" and len(parts) == 3:
                    return batches.create_anthropic(json.loads(raw))
                if method == "GET" and len(parts) == 4:
                    return batches.get_anthropic(parts[3])
                if method == "GET" and len(parts) == 5 and parts[4] == "results":
                    return batches.anthropic_results(parts[3])
                if method == "POST" and len(parts) == 5 and parts[4] == "cancel":
                    return batches.cancel(parts[3])
        except (ValueError, KeyError, TypeError, AttributeError):
            return (
                400,
                {"error": {"message": "malformed batch request", "type": "invalid_request_error"}},
                None,
            )
        return 404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}}, None


def create_app(config: FakeServerConfig | None = None) -> FakeServerApp:
    """A new fake server app with its own state (``app.state``)."""
    return FakeServerApp(config)


# ---------------------------------------------------------------- running it


def uvicorn_config(app: FakeServerApp, host: str = "127.0.0.1", port: int = 8000) -> uvicorn.Config:
    """Quiet, no access log, and a short graceful shutdown (slow faults must not hold an exit)."""
    return uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="off",
        timeout_graceful_shutdown=1, backlog=4096,
    )  # fmt: skip


@contextmanager
def running_fake_server(
    config: FakeServerConfig | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[str]:
    """Run a fake server in a background thread on `host` and a free port; yields its ``.../v1`` URL."""
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on such sockets (else ~40 ms per request)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(create_app(config), host, bound_port))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="fake-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake server did not start")
            time.sleep(0.01)
        yield f"http://{host}:{bound_port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


def _root(url: str) -> str:
    return url.rstrip("/").removesuffix("/v1")


def fetch_stats(url: str) -> dict[str, Any]:
    """GET /stats of the fake server at `url` (its ``.../v1`` URL or its root)."""
    response = httpx.get(f"{_root(url)}/stats", timeout=10, trust_env=False)
    response.raise_for_status()
    return dict(response.json())


def fetch_requests(url: str) -> list[dict[str, Any]]:
    """GET /requests: the recorded chat request bodies, oldest first, as ``{"path", "body"}``
    (empty unless the server was started with ``record_requests``; cleared by `reset_stats`)."""
    response = httpx.get(f"{_root(url)}/requests", timeout=10, trust_env=False)
    response.raise_for_status()
    return list(response.json()["requests"])


def reset_stats(url: str) -> None:
    httpx.post(f"{_root(url)}/stats/reset", timeout=10, trust_env=False).raise_for_status()
