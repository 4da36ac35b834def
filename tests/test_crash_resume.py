"""`kill -9` at random points, then resume: identical metrics, and at most `--max-connections` calls
repeated per kill (a call's slot is held until its result is committed)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.fake_runs import fake_run_config
from support.process import fake_server_process

from healthbench.results.run_results import score_stored_run
from healthbench.runner.run import run_eval
from healthbench.store import Store
from healthbench.testing.fake_server import fetch_stats, reset_stats

MAX_CONNECTIONS = 16
KILLS = 5


def write_dataset(path: Path, n: int = 60) -> None:
    rng = random.Random(5)
    axes = ["accuracy", "completeness", "communication_quality", "context_awareness"]
    with path.open("w") as out:
        for i in range(n):
            rubrics = [
                {
                    "criterion": f"Synthetic criterion {i}.{j}: mentions point {j}.",
                    "points": rng.choice([-5, 2, 4, 6, 8, 10]),
                    "tags": ["level:example", f"axis:{rng.choice(axes)}"],
                }
                for j in range(10)
            ]
            rubrics[0]["points"] = 5
            out.write(
                json.dumps(
                    {
                        "prompt": [{"role": "user", "content": f"Synthetic question {i}?"}],
                        "prompt_id": f"synthetic-{i:03d}",
                        "rubrics": rubrics,
                        "example_tags": [f"theme:t{i % 3}"],
                    }
                )
                + "\n"
            )


def command(url: str, data: Path, store: Path | str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "healthbench",
        "run",
        "--data",
        str(data),
        "--model",
        "cand",
        "--base-url",
        url,
        "--judge",
        "judge",
        "--judge-base-url",
        url,
        "--name",
        "crash",
        "--store",
        str(store),
        "--max-connections",
        str(MAX_CONNECTIONS),
    ]


@pytest.mark.slow
def test_kill_9_five_times_then_resume(tmp_path: Path, store_target: str) -> None:
    """On both back ends (`store_target`: a SQLite file, then a PostgreSQL database)."""
    data = tmp_path / "synthetic.jsonl"
    write_dataset(data)
    rng = random.Random(int(os.environ.get("HEALTHBENCH_TEST_SEED", "0")))
    with fake_server_process("--latency", "0.05") as url:
        clean_store = Store(tmp_path / "clean.db")
        cfg = fake_run_config(url, data, max_connections=MAX_CONNECTIONS)
        reset_stats(url)
        clean = run_eval(cfg, store=clean_store, name="crash")
        clean_calls = fetch_stats(url)["requests"]
        assert clean_calls == 60 + 600

        reset_stats(url)
        crash_db = store_target
        kills = 0
        for _ in range(KILLS):
            process = subprocess.Popen(
                command(url, data, crash_db), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            # kill after a random number of calls made by this process: a random point mid-run
            target = fetch_stats(url)["requests"] + rng.randint(20, 100)
            deadline = time.monotonic() + 60
            while fetch_stats(url)["requests"] < target and time.monotonic() < deadline:
                time.sleep(rng.uniform(0.0, 0.02))
            if process.poll() is None:
                kills += 1
            process.send_signal(signal.SIGKILL)
            process.wait()
        final = subprocess.run(command(url, data, crash_db), capture_output=True, text=True, timeout=120)
        assert final.returncode == 0, final.stderr
        total_calls = fetch_stats(url)["requests"]
    assert kills == KILLS  # every kill interrupted a run in the middle
    assert total_calls <= clean_calls + KILLS * MAX_CONNECTIONS
    crash_store = Store(crash_db)
    crash_run = crash_store.require_run("crash")
    assert crash_run.status == "finished"
    assert (
        score_stored_run(crash_store, crash_run).metrics()
        == score_stored_run(clean_store, clean.run).metrics()
    )
