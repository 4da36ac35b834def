"""`healthbench serve` under hostile or careless use: huge bodies with and without a token, refused
uploads, late validation, secrets in bodies, endpoints the operator does not allow, quotas, SIGTERM
mid-job and a Ray job's processes after the service stops. Every refusal has the one JSON error
shape, never a 5xx, costs the HTTP process no memory for its body and leaves no file behind."""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from service_helpers import roles, token_for
from support.process import fake_server_process
from support.service_process import LOOPBACK, service_process

from healthbench.client import Client
from healthbench.service.auth import TokenCache
from healthbench.service.errors import ServiceError
from healthbench.service.guard import RequestGuard
from healthbench.service.limits import ServiceLimits
from healthbench.service.operations import JobService
from healthbench.service.schemas import TERMINAL, JobCreate
from healthbench.service.uploads import upload_path
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store

JOBS = "/apis/evaluation/v2/workspaces/default/benchmark-jobs"
MB = 1_000_000
HUGE = 200 * MB  # what each oversized request announces (and would send, were it read)
RSS_GROWTH_MB = 16  # bound on what refused requests may add to the HTTP process


@dataclass
class Served:
    url: str
    pid: int
    token: str
    store: Path
    fake: str

    @property
    def uploads(self) -> Path:
        return self.store.with_name(f"{self.store.name}.uploads")

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, server: str) -> Iterator[Served]:
    """One `healthbench serve` that lets jobs call the module's fake server and nothing else local."""
    store = tmp_path_factory.mktemp("hostile") / "s.db"
    token = token_for(str(store), ["*"])
    with service_process(str(store), "--allow-base-url", f"{server}*") as svc:
        yield Served(svc.url, svc.process.pid, token, store, server)


def error_of(response: httpx.Response, status: int) -> str:
    """The message of an answer in the one error shape, after checking status and shape."""
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and sorted(body["error"]) == ["message", "status", "type"]
    assert body["error"]["status"] == status
    return str(body["error"]["message"])


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# -- bodies: the token first, the size before the body is read -------------------------------------
def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(x for x in status if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def stream_post(
    url: str, headers: dict[str, str], total: int, *, chunked: bool = False
) -> tuple[int, str, int]:
    """POST ``total`` bytes of a JSON body made on the fly, stopping as soon as the service answers;
    returns the status, the answer's body and how many body bytes were sent before it."""
    parts = urlsplit(url)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST {JOBS} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"{head}{framing}\r\n\r\n"
    )
    piece = b'{"data_jsonl": "' + b"x" * (MB - 16)
    sent = 0
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(request.encode())
        sock.setblocking(False)
        answered = False
        while sent < total and not answered:
            readable, writable, _ = select.select([sock], [sock], [], 10)
            if readable:
                answered = True
            elif writable:
                data = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
                try:
                    sent += sock.send(data)  # a part, when the buffers are full: counted as sent
                except (BlockingIOError, InterruptedError):
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    break
        sock.setblocking(True)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < _length(answer):
            more = sock.recv(65536)
            if not more:
                break
            answer += more
    status = int(answer.split(b" ", 2)[1])
    return status, answer.split(b"\r\n\r\n", 1)[1].decode(), sent


def _length(answer: bytes) -> int:
    for line in answer.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def test_huge_bodies_are_refused_before_they_are_read(served: Served) -> None:
    httpx.get(f"{served.url}/health", trust_env=False).raise_for_status()
    before = rss_mb(served.pid)
    cases: list[tuple[dict[str, str], bool, int, str]] = [
        ({}, False, 401, "missing bearer token"),
        ({"Authorization": "Bearer hb_not-a-token"}, False, 401, "invalid token"),
        (served.headers(), False, 413, "limit of 128 MB"),
        (served.headers(), True, 411, "Content-Length"),
    ]
    for headers, chunked, status, words in cases:
        code, text, sent = stream_post(served.url, headers, HUGE, chunked=chunked)
        response = httpx.Response(code, content=text.encode())
        assert words in error_of(response, status)
        assert sent < 16 * MB  # what the sockets' buffers took: the service read none of it
    # three at once, without a token
    results: list[tuple[int, str, int]] = []
    threads = [
        threading.Thread(target=lambda: results.append(stream_post(served.url, {}, HUGE))) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r[0] for r in results] == [401, 401, 401]
    growth = rss_mb(served.pid) - before
    assert growth < RSS_GROWTH_MB, f"the HTTP process grew by {growth:.1f} MB"
    assert httpx.get(f"{served.url}/health", trust_env=False).status_code == 200


def test_a_body_longer_than_the_cap_is_cut_off_while_it_streams() -> None:
    """Without a length to refuse up front, the guard counts: at most one chunk past the cap is read."""
    reads = 0

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        return {"type": "http.request", "body": b"x" * MB, "more_body": True}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while True:  # an app that reads the whole body (as FastAPI does)
            await receive()

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    class NoTokens(TokenCache):
        def __init__(self) -> None:
            pass

    guard = RequestGuard(app, NoTokens(), max_body=3 * MB)
    scope = {"type": "http", "method": "POST", "path": "/health", "headers": [], "query_string": b""}
    asyncio.run(guard(scope, receive, send))
    assert reads == 4
    assert sent[0]["status"] == 413
    assert b'"type":"payload_too_large"' in sent[1]["body"]


# -- bodies the service refuses at creation: 422 naming the field, never a path or a flag -----------
def _bad_jsonl() -> str:
    return '{"prompt_id": "p1", "prompt": [], "rubrics": []}\n' + "not json\n" * 100_000  # ~0.9 MB


HOSTILE_BODIES: list[tuple[str, Any, str]] = [
    ("bad template", lambda r: {**r, "grader_template": "hello"}, "grader_template"),
    ("bad upload", lambda r: {**r, "data_jsonl": _bad_jsonl()}, "data_jsonl"),
    (
        "secret in extra_body",
        lambda r: {**r, "model": {**r["model"], "settings": {"extra_body": {"api_key": "sk-abcdef123456"}}}},
        "api_key",
    ),
    (
        "secret deep in extra_body",
        lambda r: {**r, "judge": {**r["judge"], "settings": {"extra_body": {"h": [{"X-Auth-Token": "t"}]}}}},
        "X-Auth-Token",
    ),
    (
        "credentials in base_url",
        lambda r: {**r, "model": {"spec": "m", "base_url": r["model"]["base_url"].replace("//", "//u:pw@")}},
        "model.base_url",
    ),
    (
        "base_url not allowed",
        lambda r: {**r, "model": {"spec": "m", "base_url": r["model"]["base_url"].replace("/v1", "/stats?")}},
        "model.base_url",
    ),
    ("local model file", lambda r: {**r, "model": {"spec": "local//etc/hostname.gguf"}}, "model.spec"),
    (
        "ray cluster not allowed",
        lambda r: {**r, "executor": "ray", "ray_address": "10.0.0.7:6379"},
        "ray_address",
    ),
    (
        "a flag in the engine's message",
        lambda r: {**r, "model": {"spec": "local/smollm2", "base_url": r["model"]["base_url"]}},
        "base_url",
    ),
]


@pytest.mark.parametrize(("case", "make", "field"), HOSTILE_BODIES, ids=[c[0] for c in HOSTILE_BODIES])
def test_hostile_bodies_are_refused_at_creation(served: Served, case: str, make: Any, field: str) -> None:
    body = {"name": "hostile", "limit": 1, **make(roles(served.fake))}
    with httpx.Client(base_url=served.url, headers=served.headers(), trust_env=False, timeout=60) as http:
        message = error_of(http.post(JOBS, json=body), 422)
        assert field in message
        assert "--" not in message and "/tmp" not in message and str(served.store.parent) not in message
        assert "sk-abcdef" not in message
        assert http.get(JOBS).json()["pagination"]["total"] == 0  # nothing stored
    assert files_in(served.uploads) == []  # nothing left on disk


def test_uploads_live_in_the_stores_private_folder_and_go_with_their_job(served: Served) -> None:
    template = "Grade.\n<<conversation>>\n<<rubric_item>>\nAnswer in JSON."
    with Client(served.url, token=served.token) as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="templated", limit=1, grader_template=template, **roles(served.fake))
        assert client.wait_until_done("templated", interval=0.1, timeout=120).status == "completed"
        assert oct(served.uploads.stat().st_mode & 0o777) == "0o700"
        (file,) = served.uploads.iterdir()
        assert file.read_text() == template and oct(file.stat().st_mode & 0o777) == "0o600"
        jobs.delete(name="templated")
    assert files_in(served.uploads) == []


def test_a_failing_endpoint_is_reported_without_its_text(served: Served) -> None:
    """The fake server answers 404 with its own text for an unknown path: the job's error says which
    model and which status, nothing the endpoint wrote."""
    with httpx.Client(base_url=served.url, headers=served.headers(), trust_env=False, timeout=60) as http:
        r = roles(served.fake)
        body = {"name": "wrong-path", "limit": 1, "max_retries": 0, **r}
        body["model"] = {"spec": "cand", "base_url": served.fake + "/nothing-here"}
        assert http.post(JOBS, json=body).status_code == 201
        deadline = time.monotonic() + 60
        while (job := http.get(f"{JOBS}/wrong-path").json())["status"] not in ("completed", "error"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        logs = " ".join(e["message"] for e in http.get(f"{JOBS}/wrong-path/logs").json()["data"])
        assert http.delete(f"{JOBS}/wrong-path").status_code == 204
    assert job["status"] == "error"
    assert job["error"].startswith("model call failed: openai/cand at ") and "HTTP 404" in job["error"]
    assert "Not Found" not in job["error"] + logs and "--" not in job["error"]


# -- quotas -----------------------------------------------------------------------------------------
def test_a_workspace_quota_refuses_with_429_and_stores_nothing(tmp_path: Path) -> None:
    limits = ServiceLimits(workspace_queued_jobs=2, workspace_upload_mb=0.01)
    with closing(Store(tmp_path / "s.db")) as store:
        service = JobService(store, limits)
        base = roles("https://example.invalid/v1")
        template = "<<conversation>> <<rubric_item>> " + "x" * 6000
        service.create("a", JobCreate.model_validate({"name": "one", "grader_template": template, **base}))
        with pytest.raises(ServiceError) as caught:  # 6 kB + 6 kB > 10 kB
            service.create(
                "a", JobCreate.model_validate({"name": "two", "grader_template": template + "y", **base})
            )
        assert caught.value.status == 429 and "quota 0.01 MB" in caught.value.message
        service.create("a", JobCreate.model_validate({"name": "two", **base}))
        with pytest.raises(ServiceError) as caught:
            service.create("a", JobCreate.model_validate({"name": "three", **base}))
        assert caught.value.status == 429 and "2 jobs queued or running (quota 2)" in caught.value.message
        service.create("b", JobCreate.model_validate({"name": "three", **base}))  # another workspace
        assert [j.name for j in service.list("a", status=None, offset=0, limit=10).data] == ["one", "two"]
        assert len(files_in(service.folder)) == 1  # the refused template's file is gone


# -- signals and what the service started ------------------------------------------------------------
def job_state(store: Path, name: str) -> tuple[str, list[str]]:
    with closing(Store(store)) as s:
        record = JobStore(s).get("default", name)
        assert record is not None
        return record.status, [e["message"] for e in record.logs]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_hands_the_running_job_back(tmp_path: Path, sig: signal.Signals) -> None:
    store = tmp_path / "s.db"
    token = token_for(str(store), ["*"])
    with fake_server_process("--latency", "0.3") as slow, service_process(str(store), *LOOPBACK) as svc:
        with Client(svc.url, token=token) as client:
            jobs = client.evaluation.benchmark_jobs
            jobs.create(name="long", repeats=8, concurrency=2, **roles(slow))
            deadline = time.monotonic() + 60
            while jobs.get_status(name="long").status_details.samples_done == 0:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        started = time.monotonic()
        svc.process.send_signal(sig)
        code = svc.process.wait(60)
        assert time.monotonic() - started < 30
    assert code == 0  # a graceful stop, whichever the signal
    status, logs = job_state(store, "long")
    assert status == "pending" and logs[-1] == "service stopped; job handed back"


def processes() -> dict[int, tuple[bytes, bytes]]:
    """Every process this user may read: pid -> (environment, command line)."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                env = Path(f"/proc/{entry.name}/environ").read_bytes()
                found[int(entry.name)] = (env, Path(f"/proc/{entry.name}/cmdline").read_bytes())
            except OSError:
                continue
    return found


def started_by(mark: str, sessions: set[bytes]) -> dict[int, bytes]:
    """The processes whose environment holds ``mark`` (what the service started inherits it) or whose
    command line names one of the Ray ``sessions`` (the raylet is started with an environment of its
    own), with their command line."""
    return {
        pid: cmd
        for pid, (env, cmd) in processes().items()
        if mark.encode() in env or any(s in cmd for s in sessions)
    }


def ray_of(sessions: set[bytes]) -> list[bytes]:
    """The command lines of the processes of these Ray sessions still running."""
    return [cmd for _, cmd in processes().values() if any(s in cmd for s in sessions)]


@pytest.mark.slow
def test_nothing_a_ray_job_started_outlives_the_service(tmp_path: Path, server: str) -> None:
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'healthbench[ray]')")
    store = tmp_path / "s.db"
    token = token_for(str(store), ["*"])
    mark = f"HB_HOSTILE_{uuid.uuid4().hex}"
    with service_process(str(store), *LOOPBACK, env={mark: "1"}) as svc:
        sessions: set[bytes] = set()
        with Client(svc.url, token=token) as client:
            jobs = client.evaluation.benchmark_jobs
            jobs.create(name="on-ray", limit=1, repeats=3, concurrency=1, executor="ray", **roles(server))
            while not TERMINAL.intersection([jobs.get_status(name="on-ray").status]):  # Ray while it runs
                running = started_by(mark, set())
                sessions |= {m.group() for c in running.values() if (m := re.search(rb"session_[0-9_-]+", c))}
                time.sleep(0.2)
            final = client.wait_until_done("on-ray", interval=0.2, timeout=240)
            assert final.status == "completed", final.error
        assert sessions  # the job ran on a local Ray
        # which stops with its last job (issue 32: it outlived the job until the service stopped)
        deadline = time.monotonic() + 30
        while ray_of(sessions) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ray_of(sessions) == []
        svc.process.send_signal(signal.SIGTERM)
        assert svc.process.wait(90) == 0
    deadline = time.monotonic() + 10
    while started_by(mark, sessions) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = started_by(mark, sessions)
    assert left == {}, [cmd[:80] for cmd in left.values()]


def test_an_upload_file_is_used_only_with_the_content_its_name_promises(tmp_path: Path) -> None:
    folder = tmp_path / "uploads"
    folder.mkdir(mode=0o700)
    path = upload_path(folder, "<<conversation>> <<rubric_item>>", "grader_template")
    path.write_text("planted by someone else")
    assert upload_path(folder, "<<conversation>> <<rubric_item>>", "grader_template") == path
    assert path.read_text() == "<<conversation>> <<rubric_item>>"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_job_whose_model_has_no_key_is_refused_at_creation(
    service: JobService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    body = {"name": "keyless", "model": {"spec": "openai/gpt-4.1"}, "judge": {"spec": "openai/gpt-4.1"}}
    with pytest.raises(ServiceError) as caught:
        service.create("default", JobCreate.model_validate(body))
    assert caught.value.status == 422 and "OPENAI_API_KEY" in caught.value.message
    assert service.list("default", status=None, offset=0, limit=10).pagination.total == 0


def test_a_ray_address_is_joined_only_where_the_operator_allows() -> None:
    allowed = ServiceLimits(ray_addresses=("ray://head:10001",))
    allowed.check_ray_address(None)  # the worker's own Ray
    allowed.check_ray_address(" ray://head:10001 ")
    with pytest.raises(ServiceError) as refused:
        allowed.check_ray_address("ray://elsewhere:10001")
    assert refused.value.status == 422 and "elsewhere" not in str(refused.value)
    with pytest.raises(ServiceError):
        ServiceLimits(ray_addresses=()).check_ray_address("ray://head:10001")  # `serve`'s default
    ServiceLimits().check_ray_address("ray://anywhere:10001")  # in-process: the caller is the operator
