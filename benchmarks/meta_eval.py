"""Benchmark: vectorized meta-eval metrics against per-label Python loops, on data the size of the real set.

Builds 29,511 synthetic meta-eval rows (about 60,900 physician labels from 250 physicians in 30
categories, seeded), computes every metric with `healthbench.scoring.meta.meta_metrics` and with a
direct per-label loop written the way simple-evals computes it (string-keyed lists of agreements, one
append per pair, floating-point n, then the notebook's physician aggregation), checks that both agree
to 1e-12 and prints the times. Run: ``python benchmarks/meta_eval.py``.
"""

from __future__ import annotations

import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from healthbench.scoring.meta import MetaRow, meta_metrics

N_ROWS = 29_511
N_PHYSICIANS = 250
THRESHOLD = 50
SEED = 20_250_507
THEMES = ("emergency", "communication", "hedging", "complex", "health", "global", "context")


def synthetic_rows(seed: int = SEED) -> tuple[list[MetaRow], list[bool | None]]:
    rng = np.random.default_rng(seed)
    categories = [f"cluster:{THEMES[i % len(THEMES)]}_sub-{i:02d}_criterion" for i in range(30)]
    # labels per row: 1-6, mean ~2.06 -> ~60,900 labels
    sizes = rng.choice(np.arange(1, 7), size=N_ROWS, p=[0.42, 0.29, 0.17, 0.07, 0.03, 0.02])
    # distinct physicians per row, busier physicians more often (Gumbel top-k on log activity)
    activity = rng.lognormal(0.0, 1.0, N_PHYSICIANS)
    keys = np.log(activity) + rng.gumbel(size=(N_ROWS, N_PHYSICIANS))
    order = np.argsort(-keys, axis=1)[:, : sizes.max()]
    truth = rng.random(N_ROWS) < 0.55
    accuracy = rng.uniform(0.65, 0.95, N_PHYSICIANS)
    row_category = rng.integers(0, len(categories), N_ROWS)
    judge_right = rng.random(N_ROWS) < 0.85
    ungraded = rng.random(N_ROWS) < 0.003
    rows: list[MetaRow] = []
    judge: list[bool | None] = []
    for r in range(N_ROWS):
        ids = order[r, : sizes[r]]
        labels = np.where(rng.random(len(ids)) < accuracy[ids], truth[r], not truth[r])
        rows.append(
            MetaRow(categories[row_category[r]], tuple(labels.tolist()), tuple(f"p{i:03d}" for i in ids))
        )
        judge.append(None if ungraded[r] else bool(truth[r] == judge_right[r]))
    return rows, judge


# --- per-label loops, simple-evals style --------------------------------------------------------------


def loop_rater_metrics(
    own: list[bool], others: list[list[bool]], categories: list[str], rater: str
) -> dict[str, dict[str, Any]]:
    """One rater's agreement with the other labels: every pair appended to its metric's list."""
    lists: dict[str, list[bool]] = defaultdict(list)
    for label, other_labels, category in zip(own, others, categories, strict=True):
        for other in other_labels:
            agree = label == other
            for metric, cls in (("precision", label), ("recall", other)):
                key = f"pairwise_{rater}_{metric}_{'pos' if cls else 'neg'}"
                lists[key].append(agree)
                lists[f"{category}: {key}"].append(agree)
    out: dict[str, dict[str, Any]] = {
        key: {"n": len(values), "value": sum(values) / len(values)} for key, values in lists.items()
    }
    for key in [k for k in out if "_precision_" in k]:
        recall_key = key.replace("_precision_", "_recall_")
        if recall_key not in out:
            continue
        p, r = out[key], out[recall_key]
        tp = p["value"] * p["n"]
        if p["value"] == 0 and r["value"] == 0:
            f1 = 0.0
        else:
            f1 = 2 * (p["value"] * r["value"]) / (p["value"] + r["value"])
        out[key.replace("_precision_", "_f1_")] = {"n": p["n"] + r["n"] - tp, "value": f1}
    for key in [k for k in out if k.endswith("_pos")]:
        neg_key = key[: -len("_pos")] + "_neg"
        if neg_key in out:
            pos, neg = out[key], out[neg_key]
            out[key[: -len("_pos")] + "_balanced"] = {
                "n": pos["n"] + neg["n"],
                "value": (pos["value"] + neg["value"]) / 2,
            }
    return out


def weighted(entries: list[dict[str, Any]]) -> dict[str, Any]:
    total = sum(e["n"] for e in entries)
    return {"value": sum(e["value"] * e["n"] for e in entries) / total, "n": total}


def loop_metrics(rows: list[MetaRow], judge: list[bool | None], threshold: int) -> dict[str, Any]:
    graded = [(r, v) for r, v in zip(rows, judge, strict=True) if v is not None]
    model = loop_rater_metrics(
        [bool(v) for _, v in graded],
        [list(r.labels) for r, _ in graded],
        [r.category for r, _ in graded],
        "model",
    )
    by_physician: dict[str, tuple[list[bool], list[list[bool]], list[str]]] = defaultdict(
        lambda: ([], [], [])
    )
    for r in rows:
        for i, physician in enumerate(r.physician_ids):
            own, others, categories = by_physician[physician]
            own.append(r.labels[i])
            others.append(list(r.labels[:i] + r.labels[i + 1 :]))
            categories.append(r.category)
    physician_lists: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for physician, (own, others, categories) in by_physician.items():
        for key, entry in loop_rater_metrics(own, others, categories, "physician").items():
            physician_lists[key][physician] = entry

    out: dict[str, Any] = {}
    for key, entry in model.items():
        out[key], out[f"{key}:n_samples"] = entry["value"], entry["n"]
    all_categories = sorted({r.category for r in rows})
    groups = {"": [""], **{c: [c] for c in all_categories}}
    for theme in sorted({c.removeprefix("cluster:").split("_", 1)[0] for c in all_categories}):
        groups[f"theme:{theme}"] = [c for c in all_categories if c.startswith(f"cluster:{theme}_")]
    for scope, members in groups.items():
        prefix = f"{scope}: " if scope else ""
        in_scope = [(r, v) for r, v in graded if scope == "" or r.category in members]
        for key, values in (
            ("num_physician_labels", [len(r.labels) for r, _ in in_scope]),
            ("percent_physician_pos", [sum(r.labels) / len(r.labels) for r, _ in in_scope]),
            ("model_predicted_positive", [bool(v) for _, v in in_scope]),
        ):
            out[f"{prefix}{key}"], out[f"{prefix}{key}:n_samples"] = sum(values) / len(values), len(values)
    # the notebook's baseline: per physician, the n-weighted mean of the scope's category values
    for scope, members in groups.items():
        prefix = f"{scope}: " if scope else ""
        keys = [f"{m}: pairwise_{{}}_f1_balanced" if m else "pairwise_{}_f1_balanced" for m in members]
        per_physician: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for key in keys:
            for physician, entry in physician_lists[key.format("physician")].items():
                per_physician[physician].append(entry)
        judge_entries = [model[k.format("model")] for k in keys if k.format("model") in model]
        judge_value = weighted(judge_entries)["value"] if judge_entries else None
        if scope.startswith("theme:") and judge_entries:
            out[f"{prefix}pairwise_model_f1_balanced"] = judge_value
            out[f"{prefix}pairwise_model_f1_balanced:n_samples"] = weighted(judge_entries)["n"]
        pooled = [weighted(entries) for entries in per_physician.values()]
        kept = [p for p in pooled if p["n"] > threshold]
        out[f"{prefix}physician_count"] = len(kept)
        if pooled:
            out[f"{prefix}physician_f1_balanced_mean_all"] = weighted(pooled)["value"]
        if kept:
            out[f"{prefix}physician_f1_balanced_mean"] = weighted(kept)["value"]
            if judge_value is not None:
                kept_values = np.array([p["value"] for p in kept])
                below, tied = np.sum(kept_values < judge_value), np.sum(kept_values == judge_value)
                out[f"{prefix}model_f1_balanced_percentile"] = float((below + 0.5 * tied) / len(kept) * 100)
    return out


BOOKKEEPING = (
    "rows",
    "graded_rows",
    "ungraded_rows",
    "physician_labels",
    "physicians",
    "min_physician_ratings",
)


def compare(vectorized: dict[str, Any], loops: dict[str, Any]) -> int:
    """Every loop number equals the vectorized one (1e-12); every other vectorized number is undefined."""
    for key, want in loops.items():
        got = vectorized.get(key)
        assert got is not None and math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12), (key, got, want)
    for key, got in vectorized.items():
        if key not in loops:
            assert got is None or key.endswith(BOOKKEEPING) or key.endswith(":n_samples"), (key, got)
    return len(loops)


def main() -> None:
    started = time.perf_counter()
    rows, judge = synthetic_rows()
    built = time.perf_counter() - started
    n_labels = sum(len(r.labels) for r in rows)
    n_physicians = len({p for r in rows for p in r.physician_ids})
    n_categories = len({r.category for r in rows})

    vector_times = []
    for _ in range(5):
        t0 = time.perf_counter()
        result = meta_metrics(rows, judge, min_physician_ratings=THRESHOLD)
        vector_times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    loops = loop_metrics(rows, judge, THRESHOLD)
    loop_time = time.perf_counter() - t0
    checked = compare(result.metrics, loops)
    vector_time = min(vector_times)

    print(
        f"rows {len(rows):,}  labels {n_labels:,}  physicians {n_physicians}  categories {n_categories}  "
        f"ungraded {result.metrics['ungraded_rows']}  (built in {built:.1f} s)"
    )
    print(f"{'implementation':<28}{'seconds':>10}")
    print(f"{'vectorized (best of 5)':<28}{vector_time:>10.4f}")
    print(f"{'per-label loops':<28}{loop_time:>10.4f}")
    print(f"{'speed-up':<28}{loop_time / vector_time:>9.1f}x")
    print(f"agreement: {checked:,} numbers equal within 1e-12")
    print()
    print(f"{'scope':<22}{'judge F1':>9}{'phys mean':>10}{'pct':>7}{'phys':>6}{'rows':>8}")
    for s in (result.overall, *result.themes):
        judge_f1 = "-" if s.judge_f1_balanced is None else f"{s.judge_f1_balanced:.3f}"
        mean = "-" if s.physician_f1_balanced_mean is None else f"{s.physician_f1_balanced_mean:.3f}"
        pct = "-" if s.percentile is None else f"{s.percentile:.1f}"
        print(f"{s.name:<22}{judge_f1:>9}{mean:>10}{pct:>7}{s.physician_count:>6}{s.graded_rows:>8}")


if __name__ == "__main__":
    main()
