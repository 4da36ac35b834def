"""Model calls through a `ray.data.llm` pipeline, fed in batches so that Ray never runs far ahead.

One pipeline per pass (`call_through_ray`): its input is a queue the driver fills batch by batch, and
the driver adds a batch only after committing every answer it has received, while fewer than
``endpoint.in_flight`` calls are sent and uncommitted. Killing the driver therefore repeats at most
``in_flight`` calls on ``--resume`` (the answers Ray computed but had not handed over, and the calls in
flight), whatever Ray buffers internally.

Calls are retried inside the HTTP session (`EagerSession`) by the local engine's retry loop, all of a
batch's requests and retries concurrently; a call that still fails after the retries is an answer with
an error, not a failed pipeline, which the driver stores like the local engine stores a failed call.
Each answer also carries when its call started, its wall time and the kind of each retried attempt
(``CALL_FIELD``), measured where the call was made, so that the driver tells the engine's observer
(metrics, traces) of the call as the local engine does.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from healthbench.errors import FatalModelError, ModelError
from healthbench.models.base import Completion, ModelSettings, ModelSpec
from healthbench.models.errors import ProviderError
from healthbench.models.limits import ConnectionLimits, ConnectionPool, ManagedModel, RetryPolicy
from healthbench.models.openai import OpenAIChatModel, chat_body

RUN_AHEAD = 2  # batches per HTTP actor sent ahead of the driver's commits: one in flight, one queued
MAX_BATCH = 64  # requests per Ray batch, sent at once by one HTTP actor; more connections: more actors
ERROR_FIELD = "healthbench_error"  # the JSON field of an answer row that carries a failed call's error
# the JSON field (a JSON text) of a reply that says how its call went: started, seconds, retries
CALL_FIELD = "healthbench_call"


class Answer(NamedTuple):
    """One call's outcome: the index into the bodies, the response JSON, or the error of a failed call
    (``fatal``: retrying cannot help, e.g. a wrong key; the local engine stops the run on those;
    ``error_type``: its exception's name, as the local engine reports it), and how the call went where
    it was made: ``started`` (``time.time()``), ``seconds`` (its wall time, retries included; None when
    not timed: a vLLM row) and the failure kind of each retried attempt (``retries``)."""

    tag: int
    response: str
    error: str | None = None
    fatal: bool = False
    error_type: str | None = None
    started: float | None = None
    seconds: float | None = None
    retries: tuple[str, ...] = ()


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
    retry: RetryPolicy  # applied per request in `EagerSession`, as the local engine applies it
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
            max_retries=0,  # retried in the session, concurrently: Ray's stage only sees final answers
            concurrency=self.concurrency,
            batch_size=self.batch_size,
            session_factory=SessionFactory(
                self.spec, self.settings, self.api_key, self.retry, self.batch_size
            ),
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
    response = dict(row["http_response"] or {})  # (none: unreadable, a failed call to the driver)
    call = response.pop(CALL_FIELD, None)  # how the call went: a column of its own
    return {"tag": int(row["tag"]), "response": json.dumps(response), "call": call or ""}


# -- the HTTP session of Ray's HTTP stage ----------------------------------------------------------
@dataclass(frozen=True)
class SessionFactory:
    """Builds the `EagerSession` of one batch (picklable: it travels to the HTTP actors)."""

    spec: ModelSpec
    settings: ModelSettings
    api_key: str | None
    policy: RetryPolicy
    connections: int  # requests of one batch in flight at once

    def __call__(self) -> EagerSession:
        provider = OpenAIChatModel(
            self.spec, self.settings, api_key=self.api_key, max_connections=self.connections
        )
        pool = ConnectionPool(ConnectionLimits(max_connections=self.connections))
        return EagerSession(provider, ManagedModel(provider, self.policy, pool))


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


def _failed(error: ModelError) -> dict[str, Any]:
    fatal = isinstance(error, FatalModelError)
    return {ERROR_FIELD: {"message": str(error), "fatal": fatal, "type": type(error).__name__}}


class EagerSession:
    """The session Ray's HTTP stage posts through: every request starts at once and is retried here,
    so the stage only ever sees final answers and never fails the pipeline.

    Ray 2.60's HTTP stage creates every request of a batch, then awaits them one by one, and retries a
    failing one inside that loop (``base_retry_wait_time_in_s × 2^n``, one request after another,
    Retry-After ignored): under 20% faults a batch of 64 serializes a dozen backoffs. Here each request
    is a task, sent through the local engine's retry loop (`ManagedModel.call`: classified failures,
    backoff with jitter, Retry-After honoured, the same budget and give-up rules), all of a batch's
    retries waiting concurrently. A call that still fails becomes an answer carrying the error
    (``ERROR_FIELD``; ``fatal`` when retrying cannot help), which the driver stores like the local
    engine stores a failed call. Ray's own retries are off (``max_retries=0``).
    """

    def __init__(self, provider: OpenAIChatModel, model: ManagedModel) -> None:
        self._provider, self._model = provider, model

    async def __aenter__(self) -> EagerSession:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._provider.aclose()

    def post(self, url: str, *, data: Any = None, **kwargs: Any) -> asyncio.Task[_Reply]:
        # the stage posts to the endpoint's URL with its headers: the provider's own, built alike
        return asyncio.ensure_future(self._send(json.loads(data)))

    async def _send(self, body: dict[str, Any]) -> _Reply:
        answered: list[str] = []
        failures: list[str] = []  # the failure kind of each failed attempt

        async def attempt() -> Completion:
            try:
                text = await self._provider.post(body)
                completion = self._provider.parse(text)  # an unreadable answer is TRANSIENT: retried
            except ProviderError as exc:
                failures.append(exc.failure.kind.value)
                raise
            answered.append(text)
            return completion

        started, clock = time.time(), time.monotonic()
        try:
            await self._model.call(attempt)
        except ModelError as exc:
            data, retried = _failed(exc), failures[:-1]  # the last failure ended the call
        else:
            data, retried = json.loads(answered[-1]), failures
        how = {"started": started, "seconds": time.monotonic() - clock, "retries": retried}
        data[CALL_FIELD] = json.dumps(how)
        return _Reply(200, "OK", data)


def answer(tag: int, response: str, call: str = "") -> Answer:
    """An answer row as an `Answer`: a failed call's error taken out of ``ERROR_FIELD``, and how the
    call went out of ``call`` (the row's ``CALL_FIELD``; empty: not timed)."""
    how = json.loads(call) if call else {}
    went = Answer(
        tag,
        response,
        started=how.get("started"),
        seconds=how.get("seconds"),
        retries=tuple(how.get("retries") or ()),
    )
    if ERROR_FIELD in response:
        data = json.loads(response)
        if isinstance(data, dict) and isinstance(data.get(ERROR_FIELD), dict):
            error = data[ERROR_FIELD]
            return went._replace(
                error=str(error.get("message")),
                fatal=bool(error.get("fatal")),
                error_type=str(error.get("type") or "ModelError"),
            )
    return went


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
            yield answer(int(row["tag"]), str(row["response"]), str(row.get("call") or ""))
            if room():
                flush()  # everything received is committed before Ray gets more to do
                feed()
    finally:
        queue.shutdown(force=True)
