"""Benchmark: the same run through the local async engine and through `--executor ray`, side by side.

Run with ``python benchmarks/ray_executor.py [--data FILE] [--latency 1.0] [--max-connections 128]``.

One fake server (each answer takes ``--latency`` seconds), the 527-conversation shared fragment, a fresh
SQLite store per executor. Prints wall time and CPU seconds of this process (the driver) and its reaped
children (not Ray's worker processes, which live until the end), and checks both runs give the same
metrics.
Needs ``pip install 'healthbench[ray]'``. On a loaded machine the absolute figures move; the ratio,
measured in the same run, is the number to read.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from healthbench.results.run_results import score_stored_run
from healthbench.runner.run import run_eval
from healthbench.store import Store
from healthbench.testing.fake_runs import fake_run_config
from healthbench.testing.process import fake_server_process

SHARED = Path("/work/shared/data/healthbench/eval/oss_eval_sample527.jsonl")


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one_run(url: str, data: Path, executor: str, max_connections: int, folder: Path) -> dict[str, Any]:
    config = fake_run_config(url, data, max_connections=max_connections, executor=executor)
    store = Store(folder / f"{executor}.db")
    cpu, wall = cpu_seconds(), time.perf_counter()
    outcome = run_eval(config, store=store, name=executor)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return {
        "wall": wall,
        "cpu": cpu,
        "calls": outcome.counters.tally.made,
        "metrics": score_stored_run(store, outcome.run).metrics(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--max-connections", type=int, default=128)
    args = parser.parse_args(argv)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # started outside the timing
    ray.data.DataContext.get_current().enable_progress_bars = False
    results = {}
    with tempfile.TemporaryDirectory() as tmp, fake_server_process("--latency", str(args.latency)) as url:
        for executor in ("local", "ray"):
            results[executor] = one_run(url, args.data, executor, args.max_connections, Path(tmp))
    ray.shutdown()
    local, on_ray = results["local"], results["ray"]
    setup = f"{local['calls']} calls at {args.latency:g} s latency, {args.max_connections} connections"
    print(f"{args.data.name}: {setup}")
    print(f"{'executor':<10}{'wall s':>10}{'CPU s':>10}{'calls/s':>10}")
    for name, r in results.items():
        print(f"{name:<10}{r['wall']:>10.1f}{r['cpu']:>10.1f}{r['calls'] / r['wall']:>10.1f}")
    print(f"ray / local: wall {on_ray['wall'] / local['wall']:.2f}x, CPU {on_ray['cpu'] / local['cpu']:.2f}x")
    same = local["metrics"] == on_ray["metrics"] and local["calls"] == on_ray["calls"]
    print(f"same metrics and calls: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
