"""Our run vs Inspect's HealthBench port, side by side, against the same fake server with latency.

One fake server (`healthbench fake-server --latency 1`, its own process, OpenAI-compatible `/v1` on
loopback) answers both sides in turn, each run in a fresh child process on the same data file
(benchmarks/pipeline.py's: the 527-conversation shared file, or its synthetic stand-in):

- ours: `run_eval` with pipeline.py's benchmark configuration at concurrency C;
- Inspect: `inspect_evals.healthbench.healthbench(local_path=FILE)` (its default judge,
  `openai/gpt-4o-mini`) with `model="openai/gpt-4.1-mini"` and `max_connections=C` (which also bounds
  Inspect's samples in flight; the judge inherits it, in its own per-model pool), `display="none"`,
  `model_base_url` and OPENAI_BASE_URL (the judge's) on the fake server, a dummy key, a fresh Inspect
  cache and the Hugging Face hubs offline. The names are real OpenAI ones because Inspect sends an
  unknown name (`bench-candidate`) to the Responses API, which the fake server does not serve; the
  fake answers by content, not by name. Its judge replies (JSON with `criteria_met`, sometimes in a
  ```json fence) parse in Inspect's grader: a reply that did not would be retried, an extra call.

For each: wall time, calls made (the fake server's /stats, reset before each side), the calls the
design makes (one answer per conversation + one judge call per criterion; Inspect's judge reads a
criterion repeated in a conversation from its cache), the ideal time (calls x latency / C, never
below 2 x latency: pipeline.py's), efficiency = ideal / wall, the ceiling its design allows (ideal /
the fewest latency waves: ours grades as answers arrive, Inspect's scorer awaits a conversation's
criteria one by one on C sample slots), the child's CPU seconds during the run (imports excluded)
and its peak RSS; then the ratio ours / Inspect of the efficiencies.
Issue #29's guardrail: efficiency >= 0.70 alone, >= 0.85 in this side-by-side run.

    python benchmarks/inspect_pipeline.py [--latency 1] [--concurrency 256] [--limit N]

Needs `pip install inspect-evals openai` (benchmark-only: Inspect's OpenAI provider needs the
`openai` package; neither is one of the project's extras).
"""

from __future__ import annotations

import argparse
import heapq
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

MISSING = "inspect-evals is not installed: pip install inspect-evals openai (benchmark-only requirements)"


def prepare_ours(url: str, data: Path, concurrency: int, workdir: Path) -> Callable[[], None]:
    import pipeline

    from healthbench.runner.run import run_eval
    from healthbench.store import Store

    def run() -> None:
        store = Store(workdir / "ours.db")
        outcome = run_eval(pipeline.bench_config(url, data, concurrency), store=store, name="bench")
        store.close()
        assert outcome.counters.ungraded == 0, outcome.counters

    return run


def prepare_inspect(url: str, data: Path, concurrency: int, workdir: Path) -> Callable[[], None]:
    from inspect_ai import eval as inspect_eval
    from inspect_evals.healthbench import healthbench

    def run() -> None:
        [log] = inspect_eval(
            healthbench(local_path=str(data)),
            model="openai/gpt-4.1-mini",
            model_base_url=url,
            max_connections=concurrency,
            display="none",
            log_dir=str(workdir / "inspect-logs"),
        )
        assert log.status == "success", log.error

    return run


def child(side: str, url: str, data: Path, concurrency: int, workdir: Path) -> None:
    """Run one side in this (fresh) process, its imports done before the clock starts; print its
    wall, CPU seconds and the process's peak RSS as JSON."""
    run = (prepare_ours if side == "ours" else prepare_inspect)(url, data, concurrency, workdir)
    usage0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    run()
    wall, usage = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime
    print(json.dumps({"wall": wall, "cpu": cpu, "rss_mb": usage.ru_maxrss / 1024}))


def sequential_waves(criteria: list[int], concurrency: int) -> int:
    """Latency waves when each conversation's 1 + k calls run one after another (Inspect's scorer
    awaits each criterion in turn) on `concurrency` sample slots, conversations taken in file order."""
    slots = [0] * min(concurrency, len(criteria))
    for k in criteria:
        heapq.heappush(slots, heapq.heappop(slots) + 1 + k)
    return max(slots)


def measure(side: str, url: str, data: Path, concurrency: int, latency: float, workdir: Path) -> dict:
    from pipeline import ideal_seconds

    from healthbench.testing.fake_server import fetch_stats, reset_stats

    env = {
        **os.environ,
        "OPENAI_API_KEY": "bench-dummy-key",
        "OPENAI_BASE_URL": url,  # the judge's: Inspect builds it from its name alone
        "INSPECT_CACHE_DIR": str(workdir / f"inspect-cache-{side}"),  # generate(cache=True): cold
        "INSPECT_LOG_DIR": str(workdir / "inspect-logs"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    argv = [sys.executable, __file__, "--side", side, "--url", url, "--data", str(data)]
    argv += ["--concurrency", str(concurrency), "--workdir", str(workdir)]
    reset_stats(url)
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode:
        raise SystemExit(f"{side} failed ({done.returncode}):\n{done.stdout[-3000:]}")
    stats = fetch_stats(url)
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row.update(side=side, calls=stats["requests"], candidate=stats["candidate"], judge=stats["judge"])
    row["ideal"] = ideal_seconds(row["calls"], latency, concurrency)
    row["efficiency"] = row["ideal"] / row["wall"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--limit", type=int, help="only the first N conversations (a quick check)")
    parser.add_argument("--side", choices=["ours", "inspect"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not all(importlib.util.find_spec(name) for name in ("inspect_evals", "openai")):
        print(MISSING, file=sys.stderr)
        return 2
    if args.side:
        child(args.side, args.url, args.data, args.concurrency, args.workdir)
        return 0

    import pipeline
    from support.process import fake_server_process

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        data = pipeline.bench_data(workdir)
        lines = [line for line in data.read_text().splitlines() if line.strip()][: args.limit]
        if args.limit:
            data = workdir / f"first{args.limit}.jsonl"
            data.write_text("\n".join(lines) + "\n")
        rubrics = [json.loads(line)["rubrics"] for line in lines]
        print(f"data: {data.name} ({len(lines)} conversations); fake server latency {args.latency}s")
        with fake_server_process("--latency", str(args.latency)) as url:
            rows = [
                measure(side, url, data, args.concurrency, args.latency, workdir)
                for side in ("ours", "inspect")
            ]
    # calls by design: one answer per conversation + one judge call per criterion; Inspect's judge calls
    # use its cache (cache=True), so a criterion repeated in a conversation is graded once
    ours, inspect = rows
    ours["criteria"] = [len(r) for r in rubrics]
    inspect["criteria"] = [len({(c["criterion"], c["points"]) for c in r}) for r in rubrics]
    ours["waves"] = pipeline.structural_ceiling(ours["criteria"], args.concurrency)
    inspect["waves"] = sequential_waves(inspect["criteria"], args.concurrency)
    print(
        f"{'side':<8} {'C':>4} {'calls':>6} {'design':>6} {'answers':>7} {'judge':>6} {'wall s':>7} "
        f"{'ideal s':>7} {'effic.':>6} {'ceiling':>7} {'CPU s':>6} {'peak RSS MB':>11}"
    )
    for r in rows:
        design = len(r["criteria"]) + sum(r["criteria"])
        print(
            f"{r['side']:<8} {args.concurrency:>4} {r['calls']:>6} {design:>6} {r['candidate']:>7} "
            f"{r['judge']:>6} {r['wall']:>7.2f} {r['ideal']:>7.2f} {r['efficiency']:>6.2f} "
            f"{r['ideal'] / (r['waves'] * args.latency):>7.2f} {r['cpu']:>6.2f} {r['rss_mb']:>11.0f}"
        )
    print("design = one answer per conversation + one judge call per (distinct, for Inspect) criterion")
    print("ceiling = ideal / the fewest latency waves the side's design allows (ours: answers before grades;")
    print("Inspect: a conversation's calls one after another, on C sample slots)")
    print(f"efficiency ours / Inspect: {ours['efficiency'] / inspect['efficiency']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
