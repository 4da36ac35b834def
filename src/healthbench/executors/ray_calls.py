"""Model calls through a `ray.data.llm` pipeline, fed in batches so that Ray never runs far ahead.

One pipeline per pass (`call_through_ray`): its input is a queue the driver fills batch by batch, and
the driver adds a batch only after committing every answer it has received, while fewer than
``endpoint.in_flight`` calls are sent and uncommitted. Killing the driver therefore repeats at most
``in_flight`` calls on ``--resume`` (the answers Ray computed but had not handed over, and the calls in
flight), whatever Ray buffers internally.

A call that still fails after the retries is an answer with an error, not a failed pipeline: the HTTP
session (`EagerSession`) turns the last failed attempt into an error row, which the driver stores like
the local engine stores a failed call.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from healthbench.models.base import ModelSettings, ModelSpec
from healthbench.models.errors import FailureKind, ProviderError, classify_status, http_failure
from healthbench.models.openai import chat_body

RUN_AHEAD = 2  # batches per HTTP actor sent ahead of the driver's commits: one in flight, one queued
MAX_BATCH = 64  # requests per Ray batch, sent at once by one HTTP actor; more connections: more actors
ERROR_FIELD = "healthbench_error"  # the JSON field of an answer row that carries a failed call's error


class Answer(NamedTuple):
    """One call's outcome: the index into the bodies, the response JSON, or the error of a failed call
    (``fatal``: retrying cannot help, e.g. a wrong key; the local engine stops the run on those)."""

    tag: int
    response: str
    error: str | None = None
    fatal: bool = False


class RayEndpoint(Protocol):
    """What `call_through_ray` needs of an endpoint (HTTP here, vLLM in executors/vllm.py)."""

    @property
    def spec(self) -> ModelSpec: ...

    @property
    def settings(self) -> ModelSettings: ...

    @property
    def batch_size(self) -> int: ...

    @property
    def in_flight(self) -> int: ...

    def body(self, messages: list[dict[str, str]], schema: dict[str, Any] | None) -> dict[str, Any]: ...

    def processor(self) -> Any: ...


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint the pipeline calls: where, how fast, how many at once."""

    spec: ModelSpec
    settings: ModelSettings
    api_key: str | None
    concurrency: int  # HTTP actors
    qps: int | None  # requests per second per HTTP actor (ray.data.llm takes whole numbers)
    max_retries: int
    retry_wait: float
    batch_size: int

    @property
    def in_flight(self) -> int:
        """The most calls sent and not yet committed: what a killed driver can make ``--resume`` repeat."""
        return RUN_AHEAD * self.batch_size * self.concurrency

    def body(self, messages: list[dict[str, str]], schema: dict[str, Any] | None) -> dict[str, Any]:
        """The JSON body the local engine would send (`chat_body`, not a copy)."""
        return chat_body(self.spec, self.settings, messages, schema)

    def processor(self) -> Any:
        from ray.data.llm import HttpRequestProcessorConfig, build_processor

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        config = HttpRequestProcessorConfig(
            url=f"{self.spec.url}/chat/completions",
            headers=headers,
            qps=self.qps,
            max_retries=self.max_retries,
            base_retry_wait_time_in_s=self.retry_wait,
            concurrency=self.concurrency,
            batch_size=self.batch_size,
            session_factory=SessionFactory(self.max_retries, self.settings.timeout),
        )
        # the postprocess is a few string copies: it takes no CPU slot that HTTP actors could need
        return build_processor(
            config,
            preprocess=_to_payload,
            postprocess=_from_response,
            postprocess_map_kwargs={"num_cpus": 0},
        )


def _to_payload(row: dict[str, Any]) -> dict[str, Any]:
    return {"tag": row["tag"], "payload": json.loads(row["body"])}


def _from_response(row: dict[str, Any]) -> dict[str, Any]:
    return {"tag": int(row["tag"]), "response": json.dumps(row["http_response"])}


# -- the HTTP session of Ray's HTTP stage ----------------------------------------------------------
@dataclass(frozen=True)
class SessionFactory:
    """Builds the `EagerSession` of one batch (picklable: it travels to the HTTP actors)."""

    max_retries: int
    timeout: float

    def __call__(self) -> EagerSession:
        return EagerSession(self.max_retries, self.timeout)


class _Reply:
    """What Ray's HTTP stage reads of a response (status, reason, JSON), already read in full."""

    def __init__(self, status: int, reason: str | None, data: dict[str, Any]) -> None:
        self.status, self.reason, self._data = status, reason, data

    async def __aenter__(self) -> _Reply:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def json(self) -> dict[str, Any]:
        return self._data


def _failed(message: str, fatal: bool = False) -> _Reply:
    return _Reply(200, "OK", {ERROR_FIELD: {"message": message, "fatal": fatal}})


class EagerSession:
    """An aiohttp session whose ``post`` starts the request at once and never fails the pipeline.

    Ray 2.60's HTTP stage creates every request of a batch, then awaits them one by one; with aiohttp's
    lazy ``post`` that sends them one at a time (a 64-request batch at 1 s latency takes 64 s). Started as
    tasks, they are all in flight together, and the stage's qps pacing and retries still apply.

    Failures are classified like the local engine's (`classify_status`): a retryable one (429, 5xx,
    timeouts, dropped connections) is handed to Ray as a status it retries, until the last attempt, which
    becomes an answer carrying the error (``ERROR_FIELD``), as does any fatal status or unreadable body.
    """

    def __init__(self, max_retries: int, timeout: float) -> None:
        import aiohttp

        self._max_retries, self._timeout = max_retries, aiohttp.ClientTimeout(total=timeout)
        self._session = aiohttp.ClientSession(timeout=self._timeout, trust_env=False)
        self._attempts: dict[Any, int] = {}

    async def __aenter__(self) -> EagerSession:
        await self._session.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._session.__aexit__(*exc)

    def post(self, url: str, *, data: Any = None, **kwargs: Any) -> asyncio.Task[_Reply]:
        # attempts per body (Ray rebuilds the body for each retry; identical bodies in one batch, such as
        # repeats of one conversation, share a count: fewer retries, never more)
        attempt = self._attempts[data] = self._attempts.get(data, 0) + 1
        last = attempt > self._max_retries
        return asyncio.ensure_future(self._send(url, data, last, kwargs))

    async def _send(self, url: str, data: Any, last: bool, kwargs: dict[str, Any]) -> _Reply:
        import aiohttp

        try:
            async with self._session.post(url, data=data, **kwargs) as response:
                status, reason, text = response.status, response.reason, await response.text()
        except (TimeoutError, aiohttp.ClientError) as exc:
            if last:
                return _failed(f"connection error: {' '.join(str(exc).split()) or type(exc).__name__}")
            return _Reply(503, "connection error", {})  # retried by Ray's stage
        if status >= 400:
            failure = http_failure(status, text)
            if failure.kind is FailureKind.FATAL or last:
                return _failed(str(failure), fatal=failure.kind is FailureKind.FATAL)
            return _Reply(503 if classify_status(status) is FailureKind.TRANSIENT else status, reason, {})
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not parsed:
            return _failed(str(ProviderError(FailureKind.TRANSIENT, f"unreadable response: {text[:200]}")))
        return _Reply(status, reason, parsed)


def answer(tag: int, response: str) -> Answer:
    """An answer row as an `Answer` (a failed call's error taken out of ``ERROR_FIELD``)."""
    if ERROR_FIELD in response:
        data = json.loads(response)
        if isinstance(data, dict) and isinstance(data.get(ERROR_FIELD), dict):
            error = data[ERROR_FIELD]
            return Answer(tag, response, str(error.get("message")), bool(error.get("fatal")))
    return Answer(tag, response)


# -- one pass: bodies in, answers out, never more than ``in_flight`` uncommitted -------------------
def call_through_ray(
    endpoint: RayEndpoint, bodies: Sequence[dict[str, Any]], *, flush: Callable[[], None]
) -> Iterator[Answer]:
    """Answers as they stream back from the cluster. ``flush`` commits what the caller holds: it is
    called before each further batch is fed, so at most ``endpoint.in_flight`` answers are ever
    received or in flight without being committed."""
    if not bodies:
        return
    import ray.data
    from ray.util.queue import Queue

    size = endpoint.batch_size
    batches = [
        [{"tag": i, "body": json.dumps(b)} for i, b in enumerate(bodies[s : s + size], start=s)]
        for s in range(0, len(bodies), size)
    ]
    queue = Queue(actor_options={"num_cpus": 0})

    def next_batch(_: Any) -> Any:  # one input block per batch, taken when the driver puts it
        import pyarrow as pa

        return pa.Table.from_pylist(queue.get())

    # one task at a time (each waits for the driver): not one waiting worker process per batch
    source = ray.data.range(len(batches), override_num_blocks=len(batches)).map_batches(
        next_batch,
        batch_size=1,
        batch_format="pyarrow",
        num_cpus=0,
        compute=ray.data.TaskPoolStrategy(size=1),
    )
    fed = sent = received = 0  # batches fed, their rows, rows received

    def room() -> bool:
        return fed < len(batches) and sent - received + len(batches[fed]) <= endpoint.in_flight

    def feed() -> None:  # every batch there is room for
        nonlocal fed, sent
        while room():
            queue.put(batches[fed])
            fed, sent = fed + 1, sent + len(batches[fed])

    try:
        feed()
        for row in endpoint.processor()(source).iter_rows():
            received += 1
            yield answer(int(row["tag"]), str(row["response"]))
            if room():
                flush()  # everything received is committed before Ray gets more to do
                feed()
    finally:
        queue.shutdown(force=True)
