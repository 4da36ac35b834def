"""Run `healthbench serve` in its own process (tests and benchmarks), on a free loopback port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from healthbench.testing.process import free_port


@dataclass
class ServiceProcess:
    url: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        """``kill -9``: no shutdown code runs, active jobs keep their lease until it runs out."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"service exited with {process.returncode}: {err.strip()[-500:]}")
        try:
            httpx.get(f"{url}/health", timeout=1.0, trust_env=False).raise_for_status()
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise RuntimeError("service did not start in time") from None
            time.sleep(0.1)


@contextmanager
def service_process(
    store: str, *args: str, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[ServiceProcess]:
    """Start ``healthbench serve --store STORE ARGS`` and yield it once /health answers; stopped
    with SIGINT (graceful) at the end unless the caller killed it."""
    port = port or free_port()
    command = [sys.executable, "-m", "healthbench", "serve", "--store", store, "--port", str(port), *args]
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process)
        yield ServiceProcess(url, process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
