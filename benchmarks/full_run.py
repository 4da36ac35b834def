"""Full-size run: peak RSS and client CPU of a 5,000-conversation run, in an empty store and in a store
that already holds another full run, this tree's src side by side with another (e.g. `main`'s).

A synthetic HealthBench file (N conversations x C criteria; never the shared data) is run against
`healthbench fake-server --latency L` in its own process at ``--concurrency``; each run is a client
process of its own (its peak RSS its own, `peak_mb`). "prior" runs start from a copy of a store
that already holds one full run of another synthetic file (other prompts, so none of its call-cache
keys is hit). "regrade": each side regrades a copy of a store holding a full run of the file with
another judge (every criterion asked anew, every answer read from the store). Each side's prior and
regrade stores are made by its own tree (an older tree cannot open a store a newer one migrated).
Every side must give the same metrics. Prints per side and store: calls, wall, client CPU ms per
call, peak RSS after the run (and after scoring it from the store), and the plateau: the highest RSS
sampled (every 50 ms) once the engine has started, until the run ends, i.e. the run's calls without
its set-up.

    python benchmarks/full_run.py [--conversations 5000 [2500 ...]] [--criteria 14] [--concurrency 512]
        [--latency 0.2] [--baseline-src /tmp/NAME-base/src] [--stores empty prior regrade]
        [--setup-only] [--floor CALLS] [--rounds N] [--profile N] [--metrics]

``--rounds N`` runs every side and store N times, the sides alternating round by round (in reversed
order every other round), and reads the client CPU per call as each side's median over the rounds (a
process's figure moves by ±10 % from one run to the next on an idle machine; docs/benchmarks.md).

``--floor CALLS`` also measures what a call cannot cost less than, each tree in fresh processes: CALLS
bare `HttpClient.request` POSTs (the HTTP floor), and CALLS judge keys with their two rows written
through `Store.put_rows` 25 and 80 calls per commit (the key and store floor; no HTTP).

Several ``--conversations`` sizes are measured one after the other (each its own file). With
``--setup-only`` each client process only makes the run (`prepare_eval`: the dataset read, the choice
and the run's items stored; no model call) and reports its RSS after the imports, its peak RSS and the
set-up's CPU and wall seconds.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import itertools
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

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


def peak_mb() -> float:
    """This process's peak RSS in MB so far: the kernel's high-water mark of its own memory
    (``VmHWM``). Not `getrusage`'s ``ru_maxrss``, which a child spawned by `subprocess` starts with
    its parent's peak (the parent's memory map is measured when the child execs)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def cpu_since(before: resource.struct_rusage) -> float:
    """CPU seconds (user + system) this process spent since ``before``."""
    now = resource.getrusage(resource.RUSAGE_SELF)
    return now.ru_utime + now.ru_stime - before.ru_utime - before.ru_stime


def enter_tree(src: str) -> None:
    """Make ``src`` the healthbench this child imports (nothing of healthbench is imported before). The
    child runs with the interpreter's own settings, as `healthbench run` does from issue #29 on (older
    trees' commands also retuned the cyclic collector: not applied here, on either side)."""
    sys.path.insert(0, src)


def tree() -> str:
    """The src tree of the healthbench this child imported."""
    import healthbench

    return str(Path(healthbench.__file__).resolve().parents[1])


def client(
    src: str,
    url: str,
    data: str,
    store: str,
    concurrency: int,
    action: str = "run",
    profile: str = "",
    metrics: bool = False,
) -> dict[str, object]:
    """One run (``action`` "run", or "regrade" of the store's run) in this process (the child), with the
    healthbench of ``src`` (nothing of healthbench is imported in a client before this). ``profile``: a
    file to write cProfile's statistics of the run to (its CPU figure then includes the profiler's
    overhead). ``metrics``: the service's Prometheus metrics on (`MetricsObserver`, in prometheus_client's
    multiprocess mode as under `healthbench serve`)."""
    enter_tree(src)
    hooks: dict[str, Any] = {}
    if metrics:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="bench-metrics-")
        from healthbench.service.metrics import MetricsObserver

        hooks["observer"] = MetricsObserver()
    from healthbench.config import build_config

    try:
        from healthbench.executors.local import Engine
    except ImportError:  # a tree from before the engine moved to executors/ (the issue's own main)
        from healthbench.runner.engine import Engine  # type: ignore[no-redef]
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
    profiler = cProfile.Profile() if profile else None
    # CPU seconds and collections of the cyclic collector, per generation (a few µs per collection)
    collected = {"seconds": [0.0, 0.0, 0.0], "collections": [0, 0, 0]}
    began = [0.0]

    def collector(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.process_time()
        else:
            collected["seconds"][info["generation"]] += time.process_time() - began[0]
            collected["collections"][info["generation"]] += 1

    gc.callbacks.append(collector)
    t0 = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    if action == "regrade":
        judge = {"spec": "bench-judge-2", "base_url": url}
        overrides = {"max_connections": concurrency}
        outcome = regrade(
            f"bench-{Path(data).stem}", judge, store=s, name="regrade", overrides=overrides, **hooks
        )
    else:
        outcome = run_eval(cfg, store=s, name=f"bench-{Path(data).stem}", **hooks)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    wall = time.perf_counter() - t0
    gc.callbacks.remove(collector)
    sampler.stop()
    cpu, peak = cpu_since(before), peak_mb()
    metrics = score_stored_run(s, outcome.run).metrics()
    return {
        "src": tree(),
        "wall": wall,
        "cpu": cpu,
        "calls": outcome.counters.tally.made,
        "gc": collected,
        "peak_mb": peak,
        "peak_scored_mb": peak_mb(),
        "plateau_mb": sampler.plateau / 2**20,
        "metrics": {k: round(v, 12) for k, v in sorted(metrics.items()) if isinstance(v, float)},
    }


def setup_client(src: str, url: str, data: str, store: str, kind: str) -> dict[str, object]:
    """Only the run's set-up (``kind`` eval or meta-eval) in this process (the child), with the
    healthbench of ``src``."""
    enter_tree(src, "default")
    from healthbench.config import build_config
    from healthbench.runner.meta_eval import prepare_meta_eval
    from healthbench.runner.run import prepare_eval
    from healthbench.store import Store

    judge = {"spec": "bench-judge", "base_url": url}
    layer: dict[str, object]
    if kind == "eval":
        layer = {"data": data, "model": {"spec": "bench-candidate", "base_url": url}, "judge": judge}
    else:
        layer = {"dataset": "meta_eval", "data": data, "model": None, "judge": judge}
    s = Store(store)
    cfg = build_config(layer)
    prepare = prepare_eval if kind == "eval" else prepare_meta_eval
    before, start = resource.getrusage(resource.RUSAGE_SELF), peak_mb()
    t0 = time.perf_counter()
    run = prepare(s, cfg, f"bench-{Path(data).stem}")
    wall, cpu = time.perf_counter() - t0, cpu_since(before)
    return {
        "src": tree(),
        "items": len(s.load_items(run.id)),
        "wall": wall,
        "cpu": cpu,
        "start_mb": start,
        "peak_mb": peak_mb(),
    }


def http_floor(src: str, url: str, calls: int, concurrency: int) -> dict[str, object]:
    """The floor of a model call (the child): ``calls`` POSTs of a judge-sized chat body through the
    ``src`` tree's one request path (`HttpClient.request`: the body's encoding, aiohttp, the answer's
    text), ``concurrency`` at once, to the same fake server, with nothing else: no engine, key,
    prompt, parsing or store."""
    enter_tree(src)
    import asyncio

    from healthbench.models.transport import HttpClient
    from healthbench.runner.loop import run_async

    body = {"model": "bench-judge", "messages": [{"role": "user", "content": "question " * 350}]}

    async def main() -> float:
        client = HttpClient(120.0, concurrency)
        gate = asyncio.Semaphore(concurrency)

        async def one() -> None:
            async with gate:
                await client.request("POST", f"{url}/chat/completions", json=body, headers={})

        await asyncio.gather(*(one() for _ in range(concurrency)))  # the connections opened
        before = resource.getrusage(resource.RUSAGE_SELF)
        await asyncio.gather(*(one() for _ in range(calls)))
        cpu = cpu_since(before)
        await client.aclose()
        return cpu

    return {"src": tree(), "cpu": run_async(main()), "calls": calls}


def write_floor(src: str, store: str, calls: int, per_commit: int) -> dict[str, object]:
    """The rest of a call's floor (the child): per call, the judge call's cache key (`request_key` of a
    3 KB judge-sized prompt) and its two rows (a grade and its call-cache entry, random sha256 keys
    as a run's) written into a new store ``per_commit`` calls per transaction through `Store.put_rows`
    (the group commit's write), with nothing else: no HTTP, engine, prompt rendering or parsing."""
    enter_tree(src)
    from healthbench.models.base import ModelSettings, parse_model_spec, request_key
    from healthbench.store import Store
    from healthbench.store.runs import CacheEntry, GradeRow, Rows

    s = Store(store)
    items = [(f"{i:08x}", {"i": i}) for i in range(calls // 14 + 1)]
    run = s.create_run("floor", "eval", {}, items)
    spec, judge = parse_model_spec("bench-judge", "http://127.0.0.1:9/v1"), ModelSettings()
    usage = {"input_tokens": 900, "output_tokens": 60, "cached_input_tokens": 0, "reasoning_tokens": 0}
    answer = '{"explanation": "The response advises rest and fluids.", "criteria_met": true}'
    prompt = "question " * 350
    before = resource.getrusage(resource.RUSAGE_SELF)
    for start in range(0, calls, per_commit):
        rows = Rows()
        for i in range(start, min(start + per_commit, calls)):
            key = request_key(spec, judge, [{"role": "user", "content": f"{prompt}{i}"}], None)
            item = items[i // 14][0]
            rows.grades.append(
                GradeRow(item, 0, usage, 0.0001, False, None, i % 14, "met", answer, 1, judge="fake/judge")
            )
            rows.cache.append(CacheEntry(key, spec.provider, spec.model, answer, usage))
        s.put_rows(run.id, rows)
    return {"src": tree(), "cpu": cpu_since(before), "calls": calls}


CHILDREN = {
    "run": client,
    "setup": setup_client,
    "floor": http_floor,
    "write": write_floor,
}  # what `spawn` can run


def spawn(child: str, **arguments: Any) -> dict[str, object]:
    """A child process running ``CHILDREN[child](**arguments)`` (a run, a set-up alone or the request
    floor; arguments as JSON, paths as text) and what it printed; the child must have run the
    ``src`` tree it was given."""
    given = json.dumps(arguments, default=str)
    out = subprocess.run(
        [sys.executable, __file__, "--child", child, given], check=True, capture_output=True, text=True
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["src"] == str(arguments["src"]), result["src"]
    return result


def collector_line(result: dict[str, Any]) -> str:
    """The cyclic collector's CPU per call and its collections, per generation (0, 1, 2)."""
    calls = int(result["calls"])
    seconds, collections = result["gc"]["seconds"], result["gc"]["collections"]
    return ", ".join(f"{1000 * t / calls:.4f} ({n})" for t, n in zip(seconds, collections, strict=True))


def print_profile(title: str, path: Path, result: dict[str, Any], top: int) -> None:
    """The client's costliest functions by own time, and by time inside them, in ms per call; and
    the cyclic collector is not in cProfile's figures."""
    calls = int(result["calls"])
    stats = pstats.Stats(str(path))
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in entries.values())
    print(f"-- profile: {title}: {1000 * total / calls:.3f} ms/call under cProfile")
    for label, column in (("own time", 2), ("inclusive", 3)):
        ranked = sorted(entries.items(), key=lambda kv: -kv[1][column])[:top]
        print(f"   {label}:")
        for (file, line, name), row in ranked:
            where = f"{Path(file).name}:{line}" if line else file
            print(f"   {1000 * row[column] / calls:8.4f}  {row[1]:>9} {name} ({where})")


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(CHILDREN[sys.argv[2]](**json.loads(sys.argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, nargs="+", default=[5000])
    parser.add_argument("--criteria", type=int, default=14)
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument(
        "--baseline-src",
        type=Path,
        action="append",
        default=[],
        help="another tree's src/ to measure side by side (repeatable; named by the folder holding it)",
    )
    parser.add_argument(
        "--stores", nargs="+", default=["empty", "prior"], choices=["empty", "prior", "regrade"]
    )
    parser.add_argument("--setup-only", action="store_true", help="measure the run's set-up alone")
    parser.add_argument(
        "--fragments",
        action="store_true",
        help="--setup-only on dataset_read.py's files (real fragments cycled; 29,511 meta-eval rows)",
    )
    parser.add_argument(
        "--floor",
        type=int,
        metavar="CALLS",
        help="also measure the floor: CALLS bare requests through each tree's HttpClient.request, and "
        "CALLS judge keys with their rows written 25 and 80 calls per commit (no HTTP)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        metavar="N",
        help="run every side and store N times, the sides alternating round by round; with N > 1 the "
        "per-call CPU is read as each side's median over the rounds (the target line too)",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="also measure this tree with the service's Prometheus metrics on (side 'metrics')",
    )
    parser.add_argument(
        "--profile",
        type=int,
        metavar="N",
        help="run each client under cProfile and print its N costliest functions (own time, ms per call)",
    )
    args = parser.parse_args(argv)
    for conversations in args.conversations:
        if args.setup_only:
            measure_setup(args, conversations)
        else:
            measure(args, conversations)
    return 0


def _sides(args: argparse.Namespace) -> list[tuple[str, Path]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sides = [("this tree", ROOT / "src")]
    sides.extend((src.resolve().parent.name, src.resolve()) for src in args.baseline_src)
    if getattr(args, "metrics", False):
        sides.append(("metrics", ROOT / "src"))  # this tree, its runs observed (`client`'s metrics)
    return sides


def measure_setup(args: argparse.Namespace, conversations: int) -> None:
    """RSS and time of `prepare_eval` alone, each side in a fresh process, on an empty store."""
    sides = _sides(args)
    import support_path  # noqa: F401  (this tree's src/ and tests/ on sys.path)
    from pipeline import synthetic  # the pipeline benchmark's synthetic dataset

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.fragments:
            from dataset_read import write_inputs  # the reading benchmark's files from the real fragments

            files = write_inputs(work, conversations)
        else:
            files = {"eval": synthetic(work / "run.jsonl", n=conversations, criteria=args.criteria)}
        for kind, data in files.items():
            size = data.stat().st_size / 1e6
            print(f"set-up alone ({kind}, empty store, fresh process): {data.name}, {size:.1f} MB")
            head = f"{'side':>10} {'items':>6} {'wall s':>7} {'cpu s':>6} {'MB before':>9} {'peak MB':>7}"
            print(f"{head} {'+ MB':>5}")
            for label, src in sides:
                store = work / f"{label.replace(' ', '-')}-{kind}.db"
                r = spawn("setup", src=src, url="http://127.0.0.1:9/v1", data=data, store=store, kind=kind)
                start, peak = float(r["start_mb"]), float(r["peak_mb"])  # type: ignore[arg-type]
                print(
                    f"{label:>10} {int(r['items']):>6} {float(r['wall']):>7.2f} {float(r['cpu']):>6.2f} "  # type: ignore[call-overload,arg-type]
                    f"{start:>9.0f} {peak:>7.0f} {peak - start:>5.0f}"
                )


def measure(args: argparse.Namespace, conversations: int) -> None:
    sides = _sides(args)
    import support_path  # noqa: F401  (this tree's src/ and tests/ on sys.path)
    from pipeline import synthetic  # the pipeline benchmark's synthetic dataset
    from support.process import fake_server_process

    rows = []
    floors: list[tuple[str, dict[str, Any]]] = []
    writes: list[tuple[str, int, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = synthetic(work / "run.jsonl", n=conversations, criteria=args.criteria)
        other = work / "other.jsonl"
        # another full run: the same shape, other prompts (no call-cache key in common)
        other.write_text(data.read_text().replace("question ", "query "))
        print(
            f"{conversations} conversations x {args.criteria} criteria; fake server (own process): "
            f"{args.latency}s per call; --max-connections {args.concurrency}; each run its own process"
        )
        with fake_server_process("--latency", str(args.latency)) as url:
            # each side's prior and regrade stores made by its own tree (an older tree cannot open a
            # store that a newer one migrated)
            made: dict[tuple[str, str], Path] = {}
            for kind, what, file in (("prior", "another file", other), ("regrade", "the file", data)):
                if kind in args.stores:
                    for label, src in sides:
                        made[label, kind] = work / f"{label.replace(' ', '-')}-{kind}-source.db"
                        t0 = time.perf_counter()
                        spawn(
                            "run",
                            src=src,
                            url=url,
                            data=file,
                            store=made[label, kind],
                            concurrency=args.concurrency,
                        )
                        took = time.perf_counter() - t0
                        print(f"({kind} store of {label}: one full run of {what} by its tree, {took:.0f} s)")
            # the sides alternate round by round, their order reversed every other round: a round's
            # load hits every side, and no side always runs first
            for number in range(args.rounds):
                order = sides if number % 2 == 0 else sides[::-1]
                for (label, src), kind in itertools.product(order, args.stores):
                    store = work / f"{label.replace(' ', '-')}-{kind}-{number}.db"
                    if kind != "empty":
                        shutil.copy(made[label, kind], store)
                    action = "regrade" if kind == "regrade" else "run"
                    named = f"{label.replace(' ', '-')}-{kind}-{number}"
                    profile = work / f"{named}.prof" if args.profile else None
                    result = spawn(
                        "run",
                        src=src,
                        url=url,
                        data=data,
                        store=store,
                        concurrency=args.concurrency,
                        action=action,
                        profile=profile or "",
                        metrics=label == "metrics",
                    )
                    rows.append((label, kind, result))
                    for suffix in ("", "-wal", "-shm"):  # a round's store is not read again: disk kept small
                        store.with_name(store.name + suffix).unlink(missing_ok=True)
                    if profile is not None:
                        print_profile(f"{label}, {kind} store", profile, result, args.profile)
            if args.floor:
                for label, src in sides:
                    floor = spawn(
                        "floor",
                        src=src,
                        url=url,
                        calls=args.floor,
                        concurrency=args.concurrency,
                    )
                    floors.append((label, floor))
                for per_commit in (25, 80):
                    for label, src in sides:
                        store = work / f"{label.replace(' ', '-')}-write-{per_commit}.db"
                        written = spawn(
                            "write",
                            src=src,
                            store=store,
                            calls=args.floor,
                            per_commit=per_commit,
                        )
                        writes.append((label, per_commit, written))
    print(f"{'side':>10} {'store':>7} {'calls':>6} {'wall s':>7} {'cpu s':>6} {'cpu ms/call':>11} "
          f"{'of it gc':>8} {'peak MB':>7} {'+ scored':>8} {'plateau MB':>10} "
          f"{'same metrics':>12}")  # fmt: skip
    reference = rows[0][2]["metrics"]
    for label, kind, r in rows:
        calls = int(r["calls"])  # type: ignore[call-overload]
        cpu = float(r["cpu"])  # type: ignore[arg-type]
        collector = sum(r["gc"]["seconds"])  # type: ignore[index]
        print(
            f"{label:>10} {kind:>7} {calls:>6} {r['wall']:>7.1f} {cpu:>6.1f} {1000 * cpu / calls:>11.3f} "
            f"{1000 * collector / calls:>8.3f} "
            f"{r['peak_mb']:>7.0f} {r['peak_scored_mb']:>8.0f} {r['plateau_mb']:>10.0f} "
            f"{r['metrics'] == reference!s:>12}"
        )
    for label, kind, r in rows:
        print(
            f"{label:>10} {kind:>7}: collector ms/call (collections), generation 0, 1, 2: {collector_line(r)}"
        )
    for label, floor in floors:
        print(
            f"{label:>10} floor: {floor['calls']} bare HttpClient.request POSTs (a 3 KB judge-sized body): "
            f"{1000 * floor['cpu'] / floor['calls']:.3f} ms client CPU per call"
        )
    for label, per_commit, written in writes:
        print(
            f"{label:>10} floor: {written['calls']} judge keys + grade and cache rows written "
            f"{per_commit} calls per commit: {1000 * written['cpu'] / written['calls']:.3f} ms CPU per call"
        )
    per_call = {}  # (side, store) -> client CPU ms per call of each round
    for label, kind, r in rows:
        per_call.setdefault((label, kind), []).append(1000 * float(r["cpu"]) / int(r["calls"]))  # type: ignore[arg-type,call-overload]
    if args.rounds > 1:
        for (label, kind), values in per_call.items():
            print(
                f"{label:>10} {kind:>7}: cpu ms/call over {len(values)} rounds: median "
                f"{statistics.median(values):.3f} (min {min(values):.3f}, max {max(values):.3f})"
            )
    for kind in args.stores:
        if ("metrics", kind) in per_call:
            on, off = (statistics.median(per_call[side, kind]) for side in ("metrics", "this tree"))
            print(
                f"metrics on/off {kind:>7}: client CPU per call {on:.3f} / {off:.3f} ms = {on / off:.3f} "
                "(target <= 1.05)"
            )
    mine = [r for label, _, r in rows if label == "this tree"]
    ok = all(float(r["peak_mb"]) < 200 for r in mine) and all(
        statistics.median(values) <= 0.25 for (label, _), values in per_call.items() if label == "this tree"
    )
    print("targets (this tree: peak RSS < 200 MB in every store and round, <= 0.25 ms client CPU per call"
          + (", the median of the rounds" if args.rounds > 1 else "") + "): "
          + ("met" if ok else "NOT met"))  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
