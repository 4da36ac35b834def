"""A Ray that this process started (no address: a local Ray) stops with the last run or job using it
(issue 32: a cancelled service job left its local Ray running). Tested without starting Ray:
`join_ray` and `leave_ray`, or the service's `enter_ray` / `exit_ray` and its engine, are stand-ins
that record their calls; `test_ray_executor.py` runs the real thing."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from service_helpers import roles

import healthbench.executors.ray as ray_module
import healthbench.service.jobs as jobs_module
from healthbench.executors.ray import ray_session
from healthbench.service.jobs import JobWorkers, WorkerSettings
from healthbench.service.operations import JobService
from healthbench.service.schemas import JobCreate
from healthbench.store.runs import Store


def test_the_last_session_to_leave_stops_the_ray_this_process_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    connected = [False]

    def join(address: str | None, *, timeout: float) -> bool:
        calls.append(f"join {address}")
        started = not connected[0]
        connected[0] = True
        return started

    def leave() -> None:
        calls.append("leave")
        connected[0] = False

    monkeypatch.setattr(ray_module, "join_ray", join)
    monkeypatch.setattr(ray_module, "leave_ray", leave)
    with ray_session(None):  # a job: started a local Ray
        with ray_session(None):  # its run's own session inside it
            pass
        assert calls == ["join None", "join None"]  # the inner one leaves nothing running short
        with ray_session(None):  # a second job at the same time
            pass
    assert calls == ["join None", "join None", "join None", "leave"]
    with pytest.raises(RuntimeError), ray_session(None):  # a failed (or cancelled) run leaves too
        raise RuntimeError("cancelled")
    assert calls[-2:] == ["join None", "leave"] and not connected[0]


def test_a_cancelled_ray_job_leaves_ray(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    entered, left, running = threading.Event(), threading.Event(), threading.Event()

    def enter(address: str | None, *, timeout: float | None = None) -> None:
        entered.set()

    def leave() -> None:
        left.set()

    async def never_ending(*args: Any, **kwargs: Any) -> Any:
        running.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(jobs_module, "enter_ray", enter)
    monkeypatch.setattr(jobs_module, "exit_ray", leave)
    monkeypatch.setattr(jobs_module, "execute", never_ending)
    store = Store(tmp_path / "s.db")
    service = JobService(store)
    body = JobCreate.model_validate({"name": "on-ray", "executor": "ray", **roles("http://127.0.0.1:9")})
    service.create("default", body)
    with JobWorkers(store, WorkerSettings(workers=1)):
        assert running.wait(60) and entered.is_set() and not left.is_set()
        service.cancel("default", "on-ray")
        assert left.wait(60)  # the job's end left Ray (a local Ray stops with its last job)
        deadline = time.monotonic() + 60
        while service.retrieve("default", "on-ray").status != "cancelled" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert service.retrieve("default", "on-ray").status == "cancelled"
    store.close()
