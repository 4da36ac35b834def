"""Benchmark: `score_run` against a straightforward re-implementation of the simple-evals rules.

Run with ``python benchmarks/scoring.py [--conversations 5000] [--resamples 1000] [--rounds 3]``.

A synthetic 5,000-conversation run (~57k criteria: 7 themes, ~20 physician categories, 5 axes,
level:example / level:cluster, 35 clusters, points -10..10) is scored twice in the same process:

- ``reference``: plain Python loops over plain dicts, then, for every key, 1,000 separate
  ``np.random.choice`` resamples whose clipped means are taken one by one -- the way simple-evals'
  ``_compute_clipped_stats`` does it;
- ``score_run``: the library path (per-conversation metrics of all samples at once, then the
  bootstrap of `healthbench.scoring.stats`: `healthbench.scoring.bootstrap`).

The means must agree to 1e-12 and the ``n_samples`` exactly; the bootstrap stds are random on both
sides, so only their agreement within Monte Carlo noise is reported.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# benchmark this checkout's code, whichever copy of the package is installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from healthbench.data.schema import Conversation, Message, RubricItem
from healthbench.scoring.rubric import OVERALL, Verdict
from healthbench.scoring.run_score import GradedSample, ScoringOptions, sample_metrics, score_run
from healthbench.scoring.stats import BootstrapOptions, aggregate_columns, columns_of

AXES = ("accuracy", "completeness", "communication_quality", "context_awareness", "instruction_following")
AXIS_WEIGHTS = (0.34, 0.3, 0.12, 0.16, 0.08)
# 7 themes with roughly HealthBench's proportions; each theme has its own physician categories
# (20 in all) and five consensus clusters (35 in all).
THEMES = {
    "global_health": (0.22, 3),
    "hedging": (0.21, 3),
    "communication": (0.18, 2),
    "context_seeking": (0.12, 3),
    "emergency_referrals": (0.1, 3),
    "health_data_tasks": (0.1, 3),
    "complex_responses": (0.07, 3),
}
CLUSTERS_PER_THEME = 5


@dataclass(frozen=True)
class Synthetic:
    """The same run in two shapes: library samples and the plain dicts the reference reads."""

    samples: list[GradedSample]
    plain: list[dict[str, Any]]
    criteria: int


def _rubric(rng: random.Random, theme: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for number in range(rng.randint(8, 12)):
        points = rng.choice([p for p in range(-10, 11) if p != 0] + list(range(1, 11)))
        axis = rng.choices(AXES, weights=AXIS_WEIGHTS)[0]
        items.append(
            {
                "criterion": f"example criterion {number}",
                "points": points,
                "tags": ["level:example", f"axis:{axis}"],
            }
        )
    for cluster in rng.sample(range(CLUSTERS_PER_THEME), rng.choice([1, 1, 2])):
        axis = rng.choice(AXES[:3])
        items.append(
            {
                "criterion": f"cluster criterion {cluster}",
                "points": 5,
                "tags": ["level:cluster", f"cluster:{theme}_{cluster}", f"axis:{axis}"],
            }
        )
    return items


def synthesize(n_conversations: int, *, seed: int = 0) -> Synthetic:
    """A reproducible synthetic graded run (verdicts met with probability 0.55)."""
    rng = random.Random(seed)
    names = list(THEMES)
    weights = [THEMES[name][0] for name in names]
    samples: list[GradedSample] = []
    plain: list[dict[str, Any]] = []
    criteria = 0
    for index in range(n_conversations):
        theme = rng.choices(names, weights=weights)[0]
        category = f"{theme}_category_{rng.randrange(THEMES[theme][1])}"
        tags = [f"theme:{theme}", f"physician_agreed_category:{category}"]
        rubric = _rubric(rng, theme)
        met = [rng.random() < 0.55 for _ in rubric]
        criteria += len(rubric)
        conversation = Conversation(
            prompt=[Message(role="user", content=f"synthetic question {index}")],
            prompt_id=f"synthetic-{index:05d}",
            rubrics=[RubricItem(**item) for item in rubric],
            example_tags=tags,
        )
        samples.append(
            GradedSample(
                conversation=conversation,
                completion="synthetic answer",
                verdicts=tuple(Verdict.of(m) for m in met),
            )
        )
        plain.append({"example_tags": tags, "rubrics": rubric, "grades": [{"criteria_met": m} for m in met]})
    return Synthetic(samples, plain, criteria)


# --- the reference: simple-evals' rules written out plainly ---------------------------------------


def reference_score(items: list[dict[str, Any]], grades: list[dict[str, Any]]) -> float | None:
    possible = sum(item["points"] for item in items if item["points"] > 0)
    if possible == 0:
        return None
    achieved = sum(item["points"] for item, grade in zip(items, grades, strict=True) if grade["criteria_met"])
    return achieved / possible


def reference_conversation(row: dict[str, Any]) -> dict[str, float]:
    overall = reference_score(row["rubrics"], row["grades"])
    assert overall is not None
    metrics = {"overall_score": overall}
    metrics.update({tag: overall for tag in row["example_tags"]})
    by_tag: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for item, grade in zip(row["rubrics"], row["grades"], strict=True):
        for tag in item["tags"]:
            by_tag[tag].append((item, grade))
    for tag, pairs in by_tag.items():
        items, grades = zip(*pairs, strict=True)
        score = reference_score(list(items), list(grades))
        if score is not None:
            metrics[tag] = score
    return metrics


def reference_clipped_mean(values: list[float]) -> float:
    return float(np.clip(np.mean(values), 0, 1))


def reference_run(rows: list[dict[str, Any]], n_resamples: int) -> dict[str, float | int]:
    name2values: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        metrics = reference_conversation(row)
        for name, value in metrics.items():
            name2values[name].append(value)
        name2values["score"].append(metrics["overall_score"])
    out: dict[str, float | int] = {}
    for name, values in name2values.items():
        resamples = [np.random.choice(values, len(values)) for _ in range(n_resamples)]
        means = [reference_clipped_mean(list(sample)) for sample in resamples]
        out[name] = reference_clipped_mean(values)
        out[f"{name}:n_samples"] = len(values)
        out[f"{name}:bootstrap_std"] = float(np.std(means))
    return out


# --- the comparison ------------------------------------------------------------------------------------


def compare(reference: dict[str, float | int], ours: dict[str, float | int | None]) -> tuple[int, float]:
    """Check means (1e-12) and n_samples (exact); returns (keys checked, worst relative std gap)."""
    names = [k for k in reference if not k.endswith((":n_samples", ":bootstrap_std"))]
    worst_std_gap = 0.0
    for name in names:
        mine, theirs = ours[name], reference[name]
        assert mine is not None and abs(float(mine) - float(theirs)) <= 1e-12, (name, mine, theirs)
        assert ours[f"{name}:n_samples"] == reference[f"{name}:n_samples"], name
        ref_std = float(reference[f"{name}:bootstrap_std"])
        our_std = ours[f"{name}:bootstrap_std"]
        assert our_std is not None
        if ref_std > 1e-9:
            worst_std_gap = max(worst_std_gap, abs(float(our_std) - ref_std) / ref_std)
    extra = {k for k in ours if not k.endswith((":ci_lower", ":ci_upper"))} - set(reference)
    assert extra <= {"n_samples", "ungraded_criteria", "ungraded_samples"}, extra
    return len(names), worst_std_gap


def best_of(runs: int, function: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of ``runs`` calls (seconds) and the last result."""
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="the reference runs once a round, ours 5 times")
    parser.add_argument("--target", type=float, default=50.0, help="minimum speed-up to report as met")
    args = parser.parse_args(argv)

    data = synthesize(args.conversations)
    print(
        f"synthetic run: {len(data.samples)} conversations, {data.criteria} criteria, "
        f"{args.resamples} resamples"
    )
    options = ScoringOptions(n_resamples=args.resamples, seed=0)
    per_sample = [sample_metrics(s, options) for s in data.samples]
    rows = [dict(m, score=m[OVERALL]) for m in per_sample if m is not None]
    columns = columns_of(rows)  # the same columns as score_run's, to time the bootstrap alone

    # Side by side: each round runs the reference once and each of ours five times; best of all.
    ours = {
        "metrics": lambda: [sample_metrics(s, options) for s in data.samples],
        "bootstrap": lambda: aggregate_columns(
            columns, len(rows), options=BootstrapOptions(n_resamples=args.resamples, seed=0)
        ),
        "score_run": lambda: score_run(data.samples, options).metrics(),
    }
    times: dict[str, float] = defaultdict(lambda: float("inf"))
    reference: dict[str, float | int] = {}
    results: dict[str, Any] = {}
    for _ in range(args.rounds):
        np.random.seed(0)  # the reference uses numpy's global RNG, as simple-evals does
        seconds, reference = best_of(1, lambda: reference_run(data.plain, args.resamples))
        times["reference"] = min(times["reference"], seconds)
        seconds, _ = best_of(1, lambda: [reference_conversation(row) for row in data.plain])
        times["reference metrics"] = min(times["reference metrics"], seconds)
        for name, function in ours.items():
            seconds, results[name] = best_of(5, function)
            times[name] = min(times[name], seconds)

    keys, std_gap = compare(reference, results["score_run"])
    print(
        f"keys: {keys}; means agree to 1e-12, n_samples exactly; "
        f"largest relative bootstrap-std gap (Monte Carlo noise): {std_gap:.1%}"
    )
    ref, single = times["reference"], times["score_run"]
    print(
        f"reference (simple-evals transcription): {ref * 1e3:8.1f} ms "
        f"(per-conversation metrics {times['reference metrics'] * 1e3:.1f} ms, "
        f"bootstrap {(ref - times['reference metrics']) * 1e3:.1f} ms)"
    )
    print(
        f"score_run:                              {single * 1e3:8.1f} ms "
        f"(per-conversation metrics {times['metrics'] * 1e3:.1f} ms, "
        f"bootstrap {times['bootstrap'] * 1e3:.1f} ms, timed separately)"
    )
    ratio = ref / single
    verdict = "MET" if ratio >= args.target else "NOT met"
    print(f"speed-up: {ratio:5.1f}x  (target {args.target:.0f}x: {verdict})")
    print(f"(best of {args.rounds} reference runs vs best of {5 * args.rounds} of ours, side by side)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
