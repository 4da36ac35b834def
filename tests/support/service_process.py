"""Run `healthbench serve` in its own process (tests and benchmarks), on a free loopback port."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from support.process import healthbench_process

# `serve` arguments that let jobs call a fake server on this machine (plain http is refused by default)
LOOPBACK = ("--allow-base-url", "http://127.0.0.1:*")


@dataclass
class ServiceProcess:
    url: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        """``kill -9``: no shutdown code runs, active jobs keep their lease until it runs out."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


@contextmanager
def service_process(
    store: str, *args: str, env: dict[str, str] | None = None, port: int | None = None
) -> Iterator[ServiceProcess]:
    """Start ``healthbench serve --store STORE ARGS`` and yield it once /health answers; stopped
    with SIGINT (graceful) at the end unless the caller killed it."""
    with healthbench_process(
        "serve",
        "--store",
        store,
        *args,
        ready_path="/health",
        port=port,
        env=env,
        startup_timeout=60.0,
        stop_timeout=30.0,
    ) as (url, process):
        yield ServiceProcess(url, process)
