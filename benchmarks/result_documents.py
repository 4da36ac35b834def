"""Benchmark: the aggregate-scores and row-scores documents of a 5,000-conversation stored run.

Writes the synthetic run of ``benchmarks/scoring.py`` (5,000 conversations, ~56,500 criteria, 71 keys)
into a temporary SQLite store, then measures side by side in one process:

- aggregate scores (`aggregate_scores`: read, score with 1,000 resamples, range statistics for every
  key) against what ``--metrics-out`` costs (`RunView.score().metrics()`): the ratio is the price of
  NeMo's extra figures;
- row scores streamed to a JSONL file (`write_row_scores(iter_row_scores(...))`): time, and peak Python
  memory (tracemalloc) against building the same rows as one list: the ratio shows the streaming.

Run: ``python benchmarks/result_documents.py [--conversations N]``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scoring import synthesize

from healthbench.config import build_config
from healthbench.results.aggregate import aggregate_scores
from healthbench.results.rows import iter_row_scores, write_row_scores
from healthbench.results.views import VERDICT_NAMES, RunView
from healthbench.runner.run import stored_record
from healthbench.scoring.run_score import GradedSample
from healthbench.store import Store
from healthbench.store.runs import GradeRow, Rows, RunStatus, SampleRow

NAME = "bench"


def store_run(store: Store, samples: list[GradedSample]) -> None:
    """Write graded samples into ``store`` as run `NAME`, the way the engine stores them."""
    config = build_config({"dataset": "demo"})
    record = stored_record(config, kind="eval", dataset={"variant": "synthetic"}, template_sha="bench")
    run = store.create_run(
        NAME,
        "eval",
        record,
        [(s.conversation.prompt_id, s.conversation.model_dump(mode="json")) for s in samples],
    )
    rows = Rows()
    for sample in samples:
        item = sample.conversation.prompt_id
        usage = {"input_tokens": 300, "output_tokens": 400}
        rows.samples.append(SampleRow(item, 0, usage, 0.001, False, None, sample.completion, None))
        for index, verdict in enumerate(sample.verdicts):
            rows.grades.append(
                GradeRow(
                    item_id=item,
                    repeat=0,
                    usage={"input_tokens": 900, "output_tokens": 60},
                    cost=0.0005,
                    cached=False,
                    error=None,
                    criterion=index,
                    status=VERDICT_NAMES[verdict],
                    explanation="synthetic explanation",
                    attempts=1,
                    judge=config.judge.label,
                )
            )
    store.put_rows(run.id, rows)
    store.set_status(run.id, RunStatus.FINISHED)


def timed(function: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()  # no collection of the previous measurement's garbage inside this one
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def peak_memory(function: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    synthetic = synthesize(args.conversations)
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "bench.db")
        store_run(store, synthetic.samples)
        out = Path(folder) / "rows.jsonl"
        view = RunView.open(store, NAME)
        t_read = t_metrics = t_aggregate = t_rows = float("inf")
        for _ in range(args.runs):  # interleaved, so that load from others hits all alike
            t_read = min(t_read, timed(view.graded_samples)[0])
            t, metrics = timed(lambda: view.score().metrics())
            t_metrics = min(t_metrics, t)
            t, aggregate = timed(lambda: aggregate_scores(store, NAME))
            t_aggregate = min(t_aggregate, t)
            t, (_, count) = timed(lambda: write_row_scores(out, iter_row_scores(store, NAME)))
            t_rows = min(t_rows, t)
        streamed = peak_memory(lambda: write_row_scores(out, iter_row_scores(store, NAME)))
        held = peak_memory(lambda: list(iter_row_scores(store, NAME)))
        size = out.stat().st_size
        store.close()
    equal = all(
        m["aggregation"]["scores"][0]["score"] == metrics[m["metric_ref"].removeprefix("healthbench/")]
        for m in aggregate["metrics"]
    )
    print(
        f"synthetic stored run: {args.conversations} conversations, {synthetic.criteria} criteria, "
        f"{len(aggregate['metrics'])} metrics, 1000 resamples"
    )
    print(f"every aggregate score equals --metrics-out: {equal}")
    print(f"reading the graded samples alone:       {t_read * 1000:8.1f} ms")
    print(f"--metrics-out (read + score):           {t_metrics * 1000:8.1f} ms")
    print(f"aggregate_scores (read + score + range): {t_aggregate * 1000:8.1f} ms")
    print(f"aggregate / metrics-out: {t_aggregate / t_metrics:.2f}x")
    print(
        f"row scores streamed to JSONL: {count} rows, {size / 1e6:.1f} MB in {t_rows * 1000:.1f} ms "
        f"({count / t_rows:,.0f} rows/s)"
    )
    print(f"peak Python memory, streamed to file: {streamed / 1e6:8.1f} MB")
    print(f"peak Python memory, rows as one list: {held / 1e6:8.1f} MB")
    print(f"held / streamed: {held / streamed:.1f}x")
    print(f"(best of {args.runs} interleaved runs each, in one process; shared machine: times vary)")
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
