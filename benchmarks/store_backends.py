"""The store on SQLite and PostgreSQL side by side: group-committed grade writes (as the engine makes
them: many concurrent callers, one row each), reading a run's grades back, and opening a migrated store.

Starts a throw-away PostgreSQL server (as the tests do; needs Debian's `postgresql` and psycopg) next
to a SQLite file, runs the same workload on both, and prints each figure with the PostgreSQL/SQLite
ratio. The machine is shared: absolute figures move with its load, ratios measured in one run less so.

    python benchmarks/store_backends.py [--rows 20000] [--callers 256]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from pg_fixtures import running_server, unavailable  # noqa: E402

from healthbench.store import Store  # noqa: E402
from healthbench.store.runs import GradeRow, GradeStatus, Rows  # noqa: E402
from healthbench.store.writer import StoreWriter  # noqa: E402

CRITERIA = 10


def grade_row(n: int) -> GradeRow:
    return GradeRow(
        item_id=f"c{n // CRITERIA}",
        repeat=0,
        usage={"input_tokens": 900, "output_tokens": 60},
        cost=0.0001,
        cached=False,
        error=None,
        criterion=n % CRITERIA,
        status=GradeStatus.MET if n % 3 else GradeStatus.NOT_MET,
        explanation="The response mentions the point. " * 4,
        attempts=1,
        raw='{"criteria_met": true}',
        judge="fake/judge",
    )


async def write_all(store: Store, run_id: int, rows: int, callers: int) -> list[float]:
    """``callers`` tasks each write one row at a time until ``rows`` are written; returns each wait."""
    waits: list[float] = []
    numbers = iter(range(rows))

    async def caller(writer: StoreWriter) -> None:
        for n in numbers:
            start = time.perf_counter()
            await writer.put(Rows(grades=[grade_row(n)]))
            waits.append(time.perf_counter() - start)
            await asyncio.sleep(0)  # a model call would yield here

    async with StoreWriter(store, run_id) as writer:
        await asyncio.gather(*(caller(writer) for _ in range(callers)))
    return waits


def measure(target: str, rows: int, callers: int) -> dict[str, float]:
    store = Store(target)
    run = store.create_run("bench", "eval", {"run": {}}, [(f"c{i}", {}) for i in range(rows // CRITERIA)])
    start = time.perf_counter()
    waits = asyncio.run(write_all(store, run.id, rows, callers))
    write_s = time.perf_counter() - start
    start = time.perf_counter()
    loaded = store.load_grades(run.id)
    read_s = time.perf_counter() - start
    assert len(loaded) == rows
    store.close()
    opens = []
    for _ in range(10):
        start = time.perf_counter()
        Store(target).close()
        opens.append(time.perf_counter() - start)
    return {
        "rows/s written": rows / write_s,
        "median commit wait (ms)": statistics.median(waits) * 1000,
        "read back (s)": read_s,
        "open migrated store (ms)": statistics.median(opens) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--callers", type=int, default=256)
    args = parser.parse_args()
    reason = unavailable()
    if reason:
        sys.exit(f"cannot start PostgreSQL: {reason}")
    with tempfile.TemporaryDirectory() as tmp, running_server() as server:
        server.admin("CREATE DATABASE bench")
        sqlite = measure(str(Path(tmp) / "bench.db"), args.rows, args.callers)
        pg = measure(server.url("bench"), args.rows, args.callers)
    print(f"{args.rows:,} grade rows, {args.callers} concurrent callers, group commit")
    print(f"{'':28} {'SQLite':>10} {'PostgreSQL':>11} {'PG/SQLite':>10}")
    for key in sqlite:
        print(f"{key:28} {sqlite[key]:>10.2f} {pg[key]:>11.2f} {pg[key] / sqlite[key]:>10.2f}")


if __name__ == "__main__":
    main()
