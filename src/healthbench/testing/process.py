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
def fake_server_process(*args: str, port: int | None = None, startup_timeout: float = 30.0) -> Iterator[str]:
    """Start ``healthbench fake-server ARGS`` on ``port`` (default: a free loopback port); yield its
    ``.../v1`` URL."""
    port = port or free_port()
    command = [sys.executable, "-m", "healthbench", "fake-server", "--port", str(port), *args]
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if process.poll() is not None:
                err = process.stderr.read().decode() if process.stderr else ""
                raise RuntimeError(f"fake server exited with {process.returncode}: {err.strip()[-500:]}")
            try:
                httpx.get(f"{url}/stats", timeout=1.0, trust_env=False).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError("fake server did not start in time") from None
                time.sleep(0.05)
        yield f"{url}/v1"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
