"""Client cost of a ``--batch`` run vs the same run online: CPU seconds and peak RSS of the client.

Runs a synthetic HealthBench file (N conversations x C criteria) against `healthbench fake-server` in
its own process, once online (``--latency`` per call) and once with ``--batch all`` and with
``--batch judge`` (the server completes a batch ``--batch-delay`` seconds after its creation). Each run
is a separate client process, so that its peak RSS is its own. Checks that every mode gives the same
metrics, and prints wall time, client CPU seconds, CPU per 1,000 calls and peak RSS.

    python benchmarks/batch.py [--conversations 5000] [--criteria 12] [--latency 0.05]
        [--batch-delay 2] [--open-items N ...]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
import support_path  # noqa: E402, F401  (src/ and tests/ on sys.path)
from pipeline import synthetic  # noqa: E402  (the pipeline benchmark's synthetic dataset)
from support.process import fake_server_process  # noqa: E402

from healthbench.config import build_config  # noqa: E402
from healthbench.results.run_results import score_stored_run  # noqa: E402
from healthbench.runner.run import run_eval  # noqa: E402
from healthbench.store import Store  # noqa: E402


def client(url: str, data: Path, store: Path, mode: str, open_items: int | None) -> dict[str, object]:
    """One run in this process (the child): its wall time, CPU, peak RSS and metrics."""
    layer: dict[str, object] = {
        "data": str(data),
        "max_connections": 256,
        "model": {"spec": "bench-candidate", "base_url": url},
        "judge": {"spec": "bench-judge", "base_url": url},
    }
    if mode != "none":
        layer.update(batch=mode, batch_poll_interval=0.5, batch_linger=0.5)
        if open_items is not None:
            layer["batch_open_items"] = open_items
    s = Store(store)
    t0 = time.perf_counter()
    outcome = run_eval(build_config(layer), store=s, name="bench")
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    c = outcome.counters
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024,
        "calls": c.tally.made,
        "batches": c.batches_submitted,
        "metrics": score_stored_run(s, outcome.run).metrics(),
        "ungraded": c.ungraded,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--criteria", type=int, default=12)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per online call")
    parser.add_argument("--batch-delay", type=float, default=2.0, help="seconds a batch takes")
    parser.add_argument(
        "--open-items",
        type=int,
        nargs="*",
        default=[],
        help="also run --batch all with these batch_open_items",
    )
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)  # url data store mode open_items
    args = parser.parse_args(argv)
    if args.child:
        url, data, store, mode, items = args.child
        result = client(url, Path(data), Path(store), mode, int(items) if items != "-" else None)
        print(json.dumps(result))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = synthetic(work / "synthetic.jsonl", args.conversations, args.criteria)
        print(
            f"{args.conversations} conversations x {args.criteria} criteria; fake server (own process): "
            f"{args.latency}s per online call, {args.batch_delay}s per batch"
        )
        modes = [("none", None), ("judge", None), ("all", None), *(("all", n) for n in args.open_items)]
        rows = []
        server_args = ("--latency", str(args.latency), "--batch-delay", str(args.batch_delay))
        with fake_server_process(*server_args) as url:
            for i, (mode, items) in enumerate(modes):
                child = [url, str(data), str(work / f"s{i}.db"), mode, str(items) if items else "-"]
                out = subprocess.run(
                    [sys.executable, __file__, "--child", *child], capture_output=True, text=True, check=True
                )
                rows.append((mode, items, json.loads(out.stdout.strip().splitlines()[-1])))
    reference = rows[0][2]["metrics"]
    print(f"{'--batch':>8} {'open items':>10} {'calls':>6} {'batches':>7} {'wall s':>7} {'cpu s':>6} "
          f"{'cpu s/1k':>8} {'peak MB':>7} {'same metrics':>12}")  # fmt: skip
    for mode, items, r in rows:
        calls = int(r["calls"])  # type: ignore[call-overload]
        cpu = float(r["cpu"])  # type: ignore[arg-type]
        print(
            f"{mode:>8} {items or 'default':>10} {calls:>6} {r['batches']:>7} {float(r['wall']):>7.1f} "  # type: ignore[arg-type]
            f"{cpu:>6.1f} {1000 * cpu / calls:>8.2f} {float(r['peak_mb']):>7.0f} "  # type: ignore[arg-type]
            f"{r['metrics'] == reference!s:>12}"
        )
    return 0 if all(r["metrics"] == reference and r["ungraded"] == 0 for _, _, r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
