"""Run the fake server in its own process (as tests, benchmarks and users' CI do), so that the
server's CPU time never competes with the client's event loop for the GIL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

# `fake-server` arguments for a judge that never answers with JSON (every judge call is garbage)
GARBAGE_JUDGE = (
    "--fault-rate",
    "1",
    "--rate-limit-weight",
    "0",
    "--server-error-weight",
    "0",
    "--unavailable-weight",
    "0",
    "--garbage-weight",
    "1",
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def healthbench_process(
    command: str,
    *args: str,
    ready_path: str,
    port: int | None = None,
    env: dict[str, str] | None = None,
    startup_timeout: float = 30.0,
    stop_timeout: float = 10.0,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Start ``healthbench COMMAND --port PORT ARGS`` (default: a free loopback port) and yield its
    base URL and process once ``GET ready_path`` answers; stopped with SIGINT (graceful) at the end
    unless it already exited, killed when it does not stop within ``stop_timeout`` seconds."""
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "healthbench", command, "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(f"{url}{ready_path}", process, command, startup_timeout)
        yield url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(url: str, process: subprocess.Popen[bytes], command: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"{command} exited with {process.returncode}: {err.strip()[-500:]}")
        try:
            httpx.get(url, timeout=1.0, trust_env=False).raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start in time") from None
            time.sleep(0.05)


@contextmanager
def fake_server_process(*args: str, port: int | None = None, startup_timeout: float = 30.0) -> Iterator[str]:
    """Start ``healthbench fake-server ARGS`` on ``port`` (default: a free loopback port); yield its
    ``.../v1`` URL."""
    with healthbench_process(
        "fake-server", *args, ready_path="/stats", port=port, startup_timeout=startup_timeout
    ) as (url, _):
        yield f"{url}/v1"
