"""Benchmark: the judge-error correction of a 5,000-conversation run, next to scoring the same run.

Run with ``python benchmarks/correction.py [--conversations 5000] [--resamples 1000] [--rounds 3]``.

The synthetic run of ``benchmarks/scoring.py`` (~57k criteria, 71 keys, 35 clusters) is scored by
`score_run` and corrected by `scoring.correction` (per-key tables, then the joint bootstrap of
conversations and meta-eval rows) with a synthetic meta-eval of 35 categories x 200 rows, in the same
process. There is no target: the ratio says what ``--correct-with`` adds to ``healthbench results``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scoring import best_of, synthesize

from healthbench.scoring.correction import JudgeCells, correct, error_model, key_tables
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.scoring.stats import BootstrapOptions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    run = synthesize(args.conversations)
    samples = run.samples
    clusters = sorted(
        {t for s in samples for i in s.conversation.rubrics for t in i.tags if t.startswith("cluster:")}
    )
    rng = np.random.default_rng(0)
    counts = rng.multinomial(200, [0.42, 0.08, 0.45, 0.05], size=len(clusters)).astype(np.int64)
    cells = JudgeCells(tuple(clusters), counts)
    options = ScoringOptions(n_resamples=args.resamples)

    def corrected() -> Any:
        model = error_model(cells)
        tables = key_tables([s.conversation for s in samples], [s.verdicts for s in samples], model)
        return correct(
            tables,
            len(tables[OVERALL].rows),
            cells,
            model,
            options=BootstrapOptions(n_resamples=args.resamples),
        )

    scored_time, _ = best_of(args.rounds, lambda: score_run(samples, options))
    correct_time, result = best_of(args.rounds, corrected)
    print(
        f"synthetic run: {args.conversations} conversations, {run.criteria} criteria, "
        f"{args.resamples} resamples"
    )
    print(f"meta-eval: {len(clusters)} categories x 200 rows; {len(result.keys)} corrected keys")
    print(f"score_run:                             {1000 * scored_time:8.1f} ms")
    print(f"correction (tables + joint bootstrap): {1000 * correct_time:8.1f} ms")
    print(
        f"correction / score_run: {correct_time / scored_time:.1f}x  "
        f"(best of {args.rounds} each, side by side)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
