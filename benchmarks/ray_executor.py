"""Benchmark: the same run through the local async engine and through `--executor ray`, side by side.

Run with ``python benchmarks/ray_executor.py [--data FILE] [--latency 1.0] [--max-connections 128]
[--fault-rate 0.2]``.

A fake server (each answer takes ``--latency`` seconds), the 527-conversation shared fragment, a fresh
SQLite store per run. Four runs: each executor against a clean server, then against a server injecting
``--fault-rate`` faults (429 with Retry-After 0.05 s, 500, 503, bad judge JSON; judge re-asks raised to 6
so that no criterion is left ungraded by chance). Prints wall time and CPU seconds of this process (the
driver) and its reaped children (not Ray's worker processes, which live until the end), the faulty Ray
run's time over the clean one's, and checks every run gives the same metrics and makes every needed
call exactly once plus one per fault.
Needs ``pip install 'healthbench[ray]'``. On a loaded machine the absolute figures move; the ratio,
measured in the same run, is the number to read.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import support_path  # noqa: F401  (src/ and tests/ on sys.path)
from support.fake_runs import fake_run_config
from support.process import fake_server_process

from healthbench.data.schema import Conversation
from healthbench.data.sources import read_records
from healthbench.results.run_results import score_stored_run
from healthbench.runner.run import run_eval
from healthbench.store import Store
from healthbench.testing.fake_server import fetch_stats

SHARED = Path("/work/shared/data/healthbench/eval/oss_eval_sample527.jsonl")


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


FAST_RETRY = {"max_retries": 12, "initial_delay": 0.01, "max_delay": 0.05}


def one_run(
    url: str, data: Path, executor: str, max_connections: int, folder: Path, name: str
) -> dict[str, Any]:
    config = fake_run_config(
        url, data, max_connections=max_connections, executor=executor, retry=FAST_RETRY, judge_retries=6
    )
    store = Store(folder / f"{name}.db")
    cpu, wall = cpu_seconds(), time.perf_counter()
    outcome = run_eval(config, store=store, name=name)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    stats = fetch_stats(url)
    return {
        "wall": wall,
        "cpu": cpu,
        "calls": outcome.counters.tally.made,
        "requests": int(stats["requests"]),
        "answered_once": int(stats["requests"]) - int(stats["faults_total"]),
        "faults": int(stats["faults_total"]),
        "metrics": score_stored_run(store, outcome.run).metrics(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--max-connections", type=int, default=128)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    args = parser.parse_args(argv)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # started outside the timing
    ray.data.DataContext.get_current().enable_progress_bars = False
    results = {}
    server = ["--latency", str(args.latency)]
    faulty = [*server, "--fault-rate", str(args.fault_rate), "--retry-after", "0.05"]
    with tempfile.TemporaryDirectory() as tmp:
        for case, flags in (("clean", server), ("faulty", faulty)):
            for executor in ("local", "ray"):
                with fake_server_process(*flags) as url:  # a fresh server: its counts are this run's
                    name = f"{executor}-{case}"
                    results[name] = one_run(url, args.data, executor, args.max_connections, Path(tmp), name)
    ray.shutdown()
    needed = results["local-clean"]["answered_once"]
    setup = f"{needed} calls at {args.latency:g} s latency, {args.max_connections} connections"
    print(f"{args.data.name}: {setup}, faulty runs at {args.fault_rate:.0%} faults")
    print(f"{'run':<14}{'wall s':>9}{'CPU s':>9}{'criteria/s':>12}{'requests':>10}{'faults':>8}")
    criteria = needed - len(read_records(args.data, Conversation))
    for name, r in results.items():
        print(
            f"{name:<14}{r['wall']:>9.1f}{r['cpu']:>9.1f}{criteria / r['wall']:>12.0f}"
            f"{r['requests']:>10}{r['faults']:>8}"
        )
    lc, rc, rf = results["local-clean"], results["ray-clean"], results["ray-faulty"]
    print(f"ray / local (clean): wall {rc['wall'] / lc['wall']:.2f}x, CPU {rc['cpu'] / lc['cpu']:.2f}x")
    print(f"ray faulty / ray clean: wall {rf['wall'] / rc['wall']:.2f}x")
    same = all(r["metrics"] == lc["metrics"] and r["answered_once"] == needed for r in results.values())
    print(f"same metrics, every call answered once (+ one retry per fault): {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
