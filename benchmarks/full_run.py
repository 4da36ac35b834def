"""Full-size run: peak RSS and client CPU of a 5,000-conversation run, in an empty store and in a store
that already holds another full run, this tree's src side by side with another (e.g. `main`'s).

A synthetic HealthBench file (N conversations x C criteria; never the shared data) is run against
`healthbench fake-server --latency L` in its own process at ``--concurrency``; each run is a client
process of its own (so its peak RSS is its own, `getrusage`). "prior" runs start from a copy of a store
that already holds one full run of another synthetic file (other prompts, so none of its call-cache
keys is hit). "regrade": each side regrades a copy of a store holding a full run of the file (made by this
tree) with another judge (every criterion asked anew, every answer read from the store). Every side must
give the same metrics. Prints per side and store: calls, wall, client CPU ms per call, peak RSS after the
run (and after scoring it from the store), and the plateau: the highest RSS sampled (every 50 ms) once the
engine has started, i.e. the run's calls without its set-up.

    python benchmarks/full_run.py [--conversations 5000] [--criteria 14] [--concurrency 512]
        [--latency 0.2] [--baseline-src /tmp/NAME-base/src] [--stores empty prior regrade]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class RssSampler:
    """The process's resident set size every ``every`` seconds (from /proc), in a daemon thread; the
    highest between `mark` and `stop` is the plateau."""

    def __init__(self, every: float = 0.05) -> None:
        self.every, self.since, self.until, self.plateau = every, float("inf"), float("inf"), 0
        self._page = resource.getpagesize()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            with open("/proc/self/statm") as handle:
                rss = int(handle.read().split()[1]) * self._page
            if self.since <= time.perf_counter() <= self.until:
                self.plateau = max(self.plateau, rss)
            time.sleep(self.every)

    def mark(self) -> None:
        self.since = min(self.since, time.perf_counter())

    def stop(self) -> None:
        time.sleep(2 * self.every)  # a last sample
        self.until = time.perf_counter()


def client(src: str, url: str, data: str, store: str, concurrency: int, action: str) -> dict[str, object]:
    """One run (``action`` "run", or "regrade" of the store's run) in this process (the child), with the
    healthbench of ``src`` (nothing of healthbench is imported in a client before this)."""
    sys.path.insert(0, src)
    from healthbench.config import build_config
    from healthbench.executors.local import Engine
    from healthbench.results.run_results import score_stored_run
    from healthbench.runner.run import regrade, run_eval
    from healthbench.store import Store

    sampler = RssSampler()
    engine_run = Engine.run

    async def marked(self: Engine, *args: object, **kwargs: object) -> object:
        sampler.mark()  # set-up done (the run stored, its plan made): the plateau starts here
        return await engine_run(self, *args, **kwargs)  # type: ignore[arg-type]

    Engine.run = marked  # type: ignore[method-assign,assignment]

    layer = {
        "data": data,
        "max_connections": concurrency,
        "model": {"spec": "bench-candidate", "base_url": url},
        "judge": {"spec": "bench-judge", "base_url": url},
    }
    s = Store(store)
    cfg = build_config(layer)
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if action == "regrade":
        judge = {"spec": "bench-judge-2", "base_url": url}
        overrides = {"max_connections": concurrency}
        outcome = regrade(f"bench-{Path(data).stem}", judge, store=s, name="regrade", overrides=overrides)
    else:
        outcome = run_eval(cfg, store=s, name=f"bench-{Path(data).stem}")
    wall = time.perf_counter() - t0
    sampler.stop()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime - before.ru_utime - before.ru_stime
    metrics = score_stored_run(s, outcome.run).metrics()
    import healthbench

    return {
        "src": str(Path(healthbench.__file__).resolve().parents[1]),
        "wall": wall,
        "cpu": cpu,
        "calls": outcome.counters.tally.made,
        "peak_mb": usage.ru_maxrss / 1024,
        "peak_scored_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "plateau_mb": sampler.plateau / 2**20,
        "metrics": {k: round(v, 12) for k, v in sorted(metrics.items()) if isinstance(v, float)},
    }


def spawn(
    src: Path, url: str, data: Path, store: Path, concurrency: int, action: str = "run"
) -> dict[str, object]:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--client",
            str(src),
            url,
            str(data),
            str(store),
            str(concurrency),
            action,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["src"] == str(src), result["src"]  # the client ran the tree it was given
    return result


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--client":
        _, _, src, url, data, store, concurrency, action = sys.argv
        print(json.dumps(client(src, url, data, store, int(concurrency), action)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--criteria", type=int, default=14)
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--baseline-src", type=Path, help="another tree's src/ to measure side by side")
    parser.add_argument(
        "--stores", nargs="+", default=["empty", "prior"], choices=["empty", "prior", "regrade"]
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import support_path  # noqa: F401  (this tree's src/ and tests/ on sys.path)
    from pipeline import synthetic  # the pipeline benchmark's synthetic dataset
    from support.process import fake_server_process

    sides = [("this tree", ROOT / "src")]
    if args.baseline_src is not None:
        sides.append(("baseline", args.baseline_src.resolve()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = synthetic(work / "run.jsonl", n=args.conversations, criteria=args.criteria)
        other = work / "other.jsonl"
        # another full run: the same shape, other prompts (no call-cache key in common)
        other.write_text(data.read_text().replace("question ", "query "))
        print(
            f"{args.conversations} conversations x {args.criteria} criteria; fake server (own process): "
            f"{args.latency}s per call; --max-connections {args.concurrency}; each run its own process"
        )
        with fake_server_process("--latency", str(args.latency)) as url:
            prior = work / "prior.db"
            if "prior" in args.stores:
                t0 = time.perf_counter()
                spawn(ROOT / "src", url, other, prior, args.concurrency)
                print(f"(prior store: one full run of another file, {time.perf_counter() - t0:.0f} s)")
            source = work / "source.db"
            if "regrade" in args.stores:
                t0 = time.perf_counter()
                spawn(ROOT / "src", url, data, source, args.concurrency)
                print(f"(regrade store: one full run of the file, {time.perf_counter() - t0:.0f} s)")
            for label, src in sides:
                for kind in args.stores:
                    store = work / f"{label.replace(' ', '-')}-{kind}.db"
                    if kind != "empty":
                        shutil.copy(prior if kind == "prior" else source, store)
                    action = "regrade" if kind == "regrade" else "run"
                    rows.append((label, kind, spawn(src, url, data, store, args.concurrency, action)))
    print(f"{'side':>10} {'store':>7} {'calls':>6} {'wall s':>7} {'cpu s':>6} {'cpu ms/call':>11} "
          f"{'peak MB':>7} {'+ scored':>8} {'plateau MB':>10} {'same metrics':>12}")  # fmt: skip
    reference = rows[0][2]["metrics"]
    for label, kind, r in rows:
        calls = int(r["calls"])  # type: ignore[call-overload]
        cpu = float(r["cpu"])  # type: ignore[arg-type]
        print(
            f"{label:>10} {kind:>7} {calls:>6} {r['wall']:>7.1f} {cpu:>6.1f} {1000 * cpu / calls:>11.3f} "
            f"{r['peak_mb']:>7.0f} {r['peak_scored_mb']:>8.0f} {r['plateau_mb']:>10.0f} "
            f"{r['metrics'] == reference!s:>12}"
        )
    mine = [r for label, _, r in rows if label == "this tree"]
    ok = all(
        float(r["peak_mb"]) < 200 and 1000 * float(r["cpu"]) / int(r["calls"]) <= 0.25  # type: ignore[arg-type,call-overload]
        for r in mine
    )
    print("targets (this tree: peak RSS < 200 MB in every store, <= 0.25 ms client CPU per call): "
          + ("met" if ok else "NOT met"))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
