"""The conversation-level (cluster) bootstrap and the paper's worst-at-k (issue 16, parts 1 and 2).

- exactness: the one bootstrap (`healthbench.scoring.bootstrap`) draws conversations with all their
  answers: sampled ratios against the distribution enumerated with fractions;
- reduction: one answer per conversation given as its own cluster is the plain bootstrap bit for bit;
- simulation (seeded): 95% CIs of runs with correlated repeats (identical, and partly correlated)
  cover the true mean in 93-97% of 1,000 simulated runs, where the answers' bootstrap does not; a run
  of 3 identical repeats per conversation gets a CI as wide as the same run with one answer each;
- worst-at-k: the order-statistic estimator against brute-force enumeration of all k-subsets;
- the run score: CIs over conversations, ``bootstrap_std`` still simple-evals' (over answers).
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from synthetic_runs import conversations, graded, loaded
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers every command on the app)
from healthbench.analysis.report import build_report
from healthbench.cli.app import app
from healthbench.results.simple_evals import write_allresults
from healthbench.results.summary import unit_line
from healthbench.scoring.bootstrap import resample_means
from healthbench.scoring.correction import JudgeCells, KeyTable, correct, error_model
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run
from healthbench.scoring.stats import (
    BootstrapOptions,
    Column,
    aggregate_columns,
    conversation_clusters,
)
from healthbench.scoring.worst_at_k import expected_minima, minimum_weights, worst_at_k_curves

Pair = tuple[Fraction, int]


def exact_ratios(pairs: list[Pair]) -> dict[Fraction, Fraction]:
    """The exact distribution of clip(sum of sums / sum of counts) over C draws with replacement of
    the C (sum, count) pairs."""
    c = len(pairs)
    step = Counter(pairs)
    totals: dict[Pair, Fraction] = {(Fraction(0), 0): Fraction(1)}
    for _ in range(c):
        nxt: dict[Pair, Fraction] = {}
        for (s, n), p in totals.items():
            for (v, m), times in step.items():
                key = (s + v, n + m)
                nxt[key] = nxt.get(key, Fraction(0)) + p * Fraction(times, c)
        totals = nxt
    out: dict[Fraction, Fraction] = {}
    for (s, n), p in totals.items():
        ratio = min(max(s / n, Fraction(0)), Fraction(1))
        out[ratio] = out.get(ratio, Fraction(0)) + p
    return out


def test_one_answer_per_conversation_is_the_plain_bootstrap_bit_for_bit() -> None:
    values = np.array([0.1, 0.9, 0.4, 0.4, 1.0, 0.0, 0.75, -0.3, 0.6, 0.2] * 5)
    rows = np.arange(values.size)
    options = BootstrapOptions(n_resamples=500, seed=3)
    plain = aggregate_columns(
        {"k": Column(rows, values), "s": Column(rows[:20], values[:20])}, 50, options=options
    )
    own = aggregate_columns(
        {"k": Column(rows, values, rows), "s": Column(rows[:20], values[:20], rows[:20])}, 50, options=options
    )
    assert own == plain
    assert conversation_clusters(["a", "b", "c"]) is None
    assert conversation_clusters(["a", "b", "a"]).tolist() == [0, 1, 0]


def test_clustered_resamples_are_ratios_over_drawn_conversations() -> None:
    # three conversations of 1, 2 and 3 answers: every resample mean is one of the ratios that
    # drawing three of them with replacement can give, with the exact probabilities
    values = np.array([0.0, 1.0, 0.5, 0.25, 0.25, 1.0])
    clusters = np.array([0, 1, 1, 2, 2, 2])
    sums = np.bincount(clusters, weights=values)[:, None]
    counts = np.bincount(clusters).astype(np.float64)[:, None]
    boot = resample_means(sums, counts, 100_000, np.random.default_rng(0))[:, 0]
    pairs = [(Fraction(0), 1), (Fraction(3, 2), 2), (Fraction(3, 2), 3)]
    exact = exact_ratios(pairs)
    observed = Counter(np.round(boot, 12).tolist())
    for ratio, p in exact.items():
        assert observed[round(float(ratio), 12)] / boot.size == pytest.approx(float(p), abs=0.006)
    assert sum(observed[round(float(r), 12)] for r in exact) == boot.size


# --- simulation ----------------------------------------------------------------------------------------


def simulated_run(
    generator: np.random.Generator, n: int, repeats: int, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    """A run of ``n`` conversations with ``repeats`` answers each: conversation effects ~ N(0.5, 0.2),
    answer = effect + N(0, noise) (noise 0: identical repeats). The true mean is 0.5."""
    effects = generator.normal(0.5, 0.2, n)
    answers = np.repeat(effects, repeats) + (generator.normal(0, noise, n * repeats) if noise else 0.0)
    return answers, np.repeat(np.arange(n), repeats)


@pytest.mark.parametrize("noise", [0.0, 0.15])  # identical repeats, partly correlated repeats
def test_ci_coverage_with_correlated_repeats(noise: float) -> None:
    """1,000 simulated runs of 150 conversations × 3 answers: the conversation-level 95% CI covers
    the true mean in 93-97% of them; the answers' bootstrap (today's) covers it far less often."""
    generator = np.random.default_rng(11 if noise else 12)
    covered = answers_covered = 0
    for sim in range(1000):
        values, clusters = simulated_run(generator, 150, 3, noise)
        rows = np.arange(values.size)
        options = BootstrapOptions(n_resamples=400, seed=sim)
        ours = aggregate_columns({"k": Column(rows, values, clusters)}, rows.size, options=options)["k"]
        covered += ours.ci_lower <= 0.5 <= ours.ci_upper
        half = 1.96 * ours.bootstrap_std  # the answers' bootstrap: simple-evals' bootstrap_std
        answers_covered += abs(ours.mean - 0.5) <= half
        assert ours.n_conversations == 150 and ours.n_samples == 450
    assert 930 <= covered <= 970, covered
    assert answers_covered < 900, answers_covered  # treats repeats as independent: too narrow


def test_identical_repeats_give_the_ci_width_of_one_answer() -> None:
    generator = np.random.default_rng(5)
    values, clusters = simulated_run(generator, 200, 3, 0.0)
    options = BootstrapOptions(n_resamples=4000, seed=1)
    one = values[::3]
    single = aggregate_columns({"k": Column(np.arange(200), one)}, 200, options=options)["k"]
    rows = np.arange(600)
    tripled = aggregate_columns({"k": Column(rows, values, clusters)}, 600, options=options)["k"]
    ratio = (tripled.ci_upper - tripled.ci_lower) / (single.ci_upper - single.ci_lower)
    assert 0.85 <= ratio <= 1.15, ratio
    assert tripled.mean == pytest.approx(single.mean, abs=1e-12)
    answers_ratio = tripled.bootstrap_std / single.bootstrap_std  # the answers' bootstrap: ~1/sqrt(3)
    assert answers_ratio < 0.7


# --- worst-at-k ----------------------------------------------------------------------------------------


def brute_expected_minimum(scores: list[float], k: int) -> float:
    return statistics.mean(min(c) for c in itertools.combinations(scores, k))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_expected_minimum_equals_the_mean_over_every_k_subset(n: int) -> None:
    generator = np.random.default_rng(n)
    scores = np.round(generator.uniform(-0.5, 1.0, n), 2)
    scores[: n // 2] = scores[-1]  # ties
    minima = expected_minima(scores)
    for k in range(1, n + 1):
        assert minima[k - 1] == pytest.approx(brute_expected_minimum(scores.tolist(), k), abs=1e-12)
    assert minima[0] == pytest.approx(scores.mean(), abs=1e-12) and minima[-1] == scores.min()
    assert np.allclose(minimum_weights(n).sum(axis=1), 1.0)


def test_worst_at_k_curves_leave_out_short_conversations_and_clip() -> None:
    conversations = [
        np.array([0.2, 0.8, 0.5]),
        np.array([1.0, 0.9]),
        np.array([-0.6]),  # one answer: only in k = 1
        np.array([]),  # no graded answer: nowhere
    ]
    (curve,) = worst_at_k_curves([conversations], BootstrapOptions(n_resamples=300, seed=0))
    assert [p.k for p in curve] == [1, 2, 3]
    assert [p.n_conversations for p in curve] == [3, 2, 1]
    k1 = statistics.mean([0.5, 0.95, -0.6])
    k2 = statistics.mean([brute_expected_minimum([0.2, 0.8, 0.5], 2), 0.9])
    assert curve[0].worst_at_k == pytest.approx(max(0.0, k1), abs=1e-12)
    assert curve[1].worst_at_k == pytest.approx(k2, abs=1e-12)
    assert curve[2].worst_at_k == pytest.approx(0.2, abs=1e-12)
    (clipped,) = worst_at_k_curves([[np.array([-0.5, -0.2])]], BootstrapOptions(n_resamples=50, seed=0))
    assert [p.worst_at_k for p in clipped] == [0.0, 0.0]  # clipped like every run figure
    for p in curve:
        assert 0.0 <= p.ci_lower <= p.worst_at_k <= p.ci_upper <= 1.0


# --- the judge-error correction ------------------------------------------------------------------------


def test_correction_draws_conversations_with_all_their_answers() -> None:
    """Three identical answers per conversation: with their conversations given, the corrected CI is
    the one-answer run's (same seed, same draws); drawn as answers (today) it is narrower."""
    generator = np.random.default_rng(3)
    cells = JudgeCells(("cluster:a",), np.array([[80, 20, 90, 10]], dtype=np.int64))
    model = error_model(cells)
    met = np.column_stack([generator.uniform(0, 1, 60), np.zeros(60)])
    weight = np.tile([1.0, 0.0], (60, 1))
    options = BootstrapOptions(n_resamples=2000, seed=4)
    single = correct({OVERALL: KeyTable(np.arange(60), met, weight)}, 60, cells, model, options=options)
    tripled_table = KeyTable(np.arange(180), np.repeat(met, 3, axis=0), np.repeat(weight, 3, axis=0))
    clusters = np.repeat(np.arange(60), 3)
    tripled = correct({OVERALL: tripled_table}, 180, cells, model, options=options, clusters=clusters)
    as_answers = correct({OVERALL: tripled_table}, 180, cells, model, options=options)
    one, three, answers = single.keys[OVERALL], tripled.keys[OVERALL], as_answers.keys[OVERALL]
    assert three.corrected == pytest.approx(one.corrected, abs=1e-12)
    assert three.ci_lower == pytest.approx(one.ci_lower, abs=1e-12)
    assert three.ci_upper == pytest.approx(one.ci_upper, abs=1e-12)
    assert answers.ci_upper - answers.ci_lower < 0.9 * (one.ci_upper - one.ci_lower)


# --- the run score ---------------------------------------------------------------------------------------


def test_run_score_cis_are_over_conversations_and_bootstrap_std_over_answers() -> None:
    """A run answering 60 conversations 3 times the same way: its CI is the one-answer run's (not
    0.58× of it, as when answers were resampled); ``:bootstrap_std`` stays simple-evals' (answers);
    the summary says what the CI is over."""
    once = graded(conversations(60, seed=2), hit_rate=0.5, seed=3)
    thrice = [
        GradedSample(s.conversation, s.completion, s.verdicts, repeat=r) for r in range(3) for s in once
    ]
    options = ScoringOptions(n_resamples=2000, seed=0)
    single, tripled = score_run(once, options), score_run(thrice, options)
    one, three = single.stats[OVERALL], tripled.stats[OVERALL]
    assert (three.n_samples, three.n_conversations) == (180, 60)
    assert (one.n_samples, one.n_conversations) == (60, 60)
    assert three.mean == pytest.approx(one.mean, abs=1e-12)
    assert three.ci_lower == pytest.approx(one.ci_lower, abs=1e-12)
    assert three.ci_upper == pytest.approx(one.ci_upper, abs=1e-12)
    for key, stats in tripled.stats.items():  # themes and axes too
        assert stats.ci_upper - stats.ci_lower == pytest.approx(
            single.stats[key].ci_upper - single.stats[key].ci_lower, abs=1e-12
        ), key
    # simple-evals' bootstrap_std: over the 180 answers, as if the conversations had not been told
    apart = [  # each answer its own conversation: the answers' bootstrap
        replace(s, conversation=s.conversation.model_copy(update={"prompt_id": f"answer {i}"}))
        for i, s in enumerate(thrice)
    ]
    answers = score_run(apart, options)
    metrics = tripled.metrics()
    assert metrics["overall_score:bootstrap_std"] == answers.stats[OVERALL].bootstrap_std
    assert metrics["overall_score:bootstrap_std"] < 0.7 * one.bootstrap_std
    assert metrics["overall_score:ci_lower"] == three.ci_lower
    assert unit_line(single) is None
    assert "60 conversations × 3 answers" in (unit_line(tripled) or "")


def test_report_shows_the_ci_unit_and_each_models_worst_at_k_curve() -> None:
    """Two runs of one model (1 and 2 answers per conversation) and one of another: the report's
    worst-at-k curve pools each model's runs (k up to 3), its points are the library's, the cards say
    what each CI is over, and the page has the curve's table."""
    convs = conversations(40, seed=4)
    runs = [
        loaded(graded(convs, hit_rate=0.5, seed=1), "model-a", "r1"),
        loaded(graded(convs, hit_rate=0.6, seed=2, repeats=2), "model-a", "r2"),
        loaded(graded(convs[:30], hit_rate=0.7, seed=3), "model-b", "r1"),
    ]
    options = ScoringOptions(n_resamples=200, seed=1)
    report = build_report(runs, options=options, conversations=False)
    assert [r["ci_unit"] for r in report.summary["runs"]] == [
        "40 conversations",
        "40 conversations × 2 answers",
        "30 conversations",
    ]
    curves = {c["model"]: c["points"] for c in report.summary["worst_at_k"]}
    assert [p["k"] for p in curves["model-a"]] == [1, 2, 3] and [p["k"] for p in curves["model-b"]] == [1]
    by_conversation: dict[str, list[float]] = {}
    for run in runs[:2]:
        for sample, metrics in zip(run.samples, score_run(run.samples, options).per_sample, strict=True):
            by_conversation.setdefault(sample.conversation.prompt_id, []).append(metrics[OVERALL])
    for point in curves["model-a"]:
        k = point["k"]
        expected = statistics.mean(brute_expected_minimum(v, k) for v in by_conversation.values())
        assert point["value"] == pytest.approx(min(1.0, max(0.0, expected)), abs=1e-12)
        assert point["n"] == 40 and point["lo"] <= point["value"] <= point["hi"]
    html = report.html()
    assert "CI over 40 conversations × 2 answers" in html
    assert html.count('<tr><th scope="row">model-a</th><td>') == 3


def test_analyze_cli_says_what_the_ci_is_over_and_writes_the_curve(tmp_path: Path) -> None:
    """A simple-evals file of 30 conversations × 3 answers: ``analyze`` prints the unit beside the CI
    and the worst-at-k curve, and writes worst_at_k.csv with k = 1..3."""
    convs = conversations(30, seed=8)
    samples = graded(convs, hit_rate=0.6, seed=9, repeats=3)
    path = tmp_path / "healthbench_rep-model_20260105_000000_allresults.json"
    write_allresults(path, samples, score_run(samples, ScoringOptions(n_resamples=0)))
    result = CliRunner().invoke(
        app, ["analyze", str(path), "--out", str(tmp_path / "out"), "--n-resamples", "100"]
    )
    assert result.exit_code == 0, result.stderr
    flat = " ".join(result.stdout.split())
    assert "30 conversations × 3 answers" in flat and "Worst-at-k" in flat
    curve = pl.read_csv(tmp_path / "out" / "worst_at_k.csv")
    assert curve["k"].to_list() == [1, 2, 3] and curve["n_conversations"].to_list() == [30, 30, 30]
    themes = pl.read_csv(tmp_path / "out" / "theme_data.csv")
    overall = themes.filter(pl.col("theme") == "all").row(0, named=True)
    assert (overall["n_samples"], overall["n_conversations"]) == (90, 30)
