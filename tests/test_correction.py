"""Judge-error correction (scoring/correction.py): Rogan–Gladen by hand, the per-category fallback,
the undefined cases, and a simulation with a synthetic judge of known error rates."""

from __future__ import annotations

import numpy as np
import pytest

from healthbench.scoring.correction import (
    POOLED,
    CorrectionError,
    JudgeCells,
    KeyTable,
    correct,
    error_model,
    judge_cells,
    key_tables,
    rates,
)
from healthbench.scoring.rubric import OVERALL, Verdict
from healthbench.scoring.stats import BootstrapOptions

MET, NOT = Verdict.MET, Verdict.NOT_MET


def cells_of(**per_category: tuple[int, int, int, int]) -> JudgeCells:
    names = tuple(sorted(per_category))
    return JudgeCells(names, np.array([per_category[n] for n in names], dtype=np.int64))


def test_judge_cells_use_the_physician_majority_and_drop_ties_and_ungraded() -> None:
    cells = judge_cells(
        ["cluster:a", "cluster:a", "cluster:a", "cluster:b", "cluster:b", "cluster:b"],
        [[True, True, False], [False, False, True], [True, False], [True], [False], [True]],
        [True, True, True, False, False, None],
    )
    assert cells.categories == ("cluster:a", "cluster:b")
    # a: truth met + judge met (tp), truth not met + judge met (fp), a tie (dropped)
    # b: truth met + judge not met (fn), truth not met + judge not met (tn), ungraded (dropped)
    assert cells.counts.tolist() == [[1, 0, 0, 1], [0, 1, 1, 0]]
    assert cells.dropped_rows == 2


def test_rogan_gladen_by_hand() -> None:
    # Se = 80 / 100 = 0.8, Sp = 90 / 100 = 0.9 in the only category
    cells = cells_of(**{"cluster:a": (80, 20, 90, 10)})
    model = error_model(cells, min_rows=30)
    assert model.used == ("cluster:a",)
    assert (model.sensitivity["cluster:a"], model.specificity["cluster:a"]) == (0.8, 0.9)
    # one conversation: 4 criteria of 1 point in cluster:a, 2 observed met: p = 0.5
    # true rate = (0.5 + 0.9 - 1) / (0.8 + 0.9 - 1) = 0.4 / 0.7
    table = KeyTable(np.array([0]), np.array([[0.5, 0.0]]), np.array([[1.0, 0.0]]))
    result = correct({OVERALL: table}, 1, cells, model, options=BootstrapOptions(n_resamples=0))
    assert result.keys[OVERALL].raw == 0.5
    assert result.keys[OVERALL].corrected == pytest.approx(0.4 / 0.7, abs=1e-15)
    assert result.keys[OVERALL].ci_lower is None


def test_key_tables_weights_by_points_and_slots_by_cluster(make_conversation) -> None:
    conversation = make_conversation(
        [(6, ["cluster:a", "axis:x"]), (2, ["axis:x"]), (-4, ["cluster:b"]), (2, [])],
        example_tags=["theme:t"],
    )
    cells = cells_of(**{"cluster:a": (40, 10, 45, 5), "cluster:b": (1, 1, 1, 1)})
    model = error_model(cells, min_rows=30)
    assert model.used == ("cluster:a",) and model.fallback[0][0] == "cluster:b"  # too few rows: pooled
    tables = key_tables([conversation], [[MET, NOT, MET, MET]], model)
    overall = tables[OVERALL]
    # positive points 10: slot a has 6/10 (met), the pooled slot 2/10 + -4/10 + 2/10 (met: -4 and 2)
    assert overall.weight.tolist() == [[0.6, pytest.approx(0.0)]]
    assert overall.met.tolist() == [[0.6, pytest.approx(-0.2)]]
    assert set(tables) == {OVERALL, "theme:t", "cluster:a", "axis:x"}  # cluster:b has no positive point
    assert tables["axis:x"].met.tolist() == [[0.75, 0.0]]
    result = correct(tables, 1, cells, model, options=BootstrapOptions(n_resamples=0))
    assert result.keys[OVERALL].raw == pytest.approx(0.4, abs=1e-15)
    se_a, sp_a = 40 / 50, 45 / 50
    se_p, sp_p = 41 / 52, 46 / 52
    expected = (0.6 - 0.6 * (1 - sp_a)) / (se_a + sp_a - 1) + (-0.2 - 0.0 * (1 - sp_p)) / (se_p + sp_p - 1)
    assert result.keys[OVERALL].corrected == pytest.approx(max(0.0, min(1.0, expected)), abs=1e-12)
    assert result.keys["theme:t"].corrected == result.keys[OVERALL].corrected


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        ((10, 5, 40, 10), "too few rows \\(15 met, 50 not met by physicians; 30 of each needed\\)"),
        ((30, 30, 30, 30), "sensitivity \\+ specificity = 1.000 <= 1 \\+ 0.05"),
        ((20, 40, 20, 40), "sensitivity \\+ specificity = 0.667"),
    ],
)
def test_undefined_corrections_are_a_message(counts: tuple[int, int, int, int], message: str) -> None:
    with pytest.raises(CorrectionError, match=message):
        error_model(cells_of(**{"cluster:a": counts}))


def test_a_perfect_judge_leaves_every_score_unchanged(make_conversation) -> None:
    conversations = [
        make_conversation([(5, ["cluster:a"]), (3, ["axis:x"]), (-2, [])], prompt_id=f"c{i}")
        for i in range(6)
    ]
    verdicts = [
        [MET, NOT, MET],
        [NOT, NOT, NOT],
        [MET, MET, NOT],
        [MET, MET, MET],
        [NOT, MET, MET],
        [MET, NOT, NOT],
    ]
    cells = cells_of(**{"cluster:a": (50, 0, 60, 0)})
    model = error_model(cells)
    result = correct(
        key_tables(conversations, verdicts, model),
        6,
        cells,
        model,
        options=BootstrapOptions(n_resamples=200, seed=1),
    )
    for key, value in result.keys.items():
        assert value.corrected == value.raw, key
    assert result.unstable_draws == 0


def test_an_unstable_bootstrap_gives_no_interval() -> None:
    # 31 of each truth value and Se + Sp = 1.13: resampling often drops it to 1.05 or below
    cells = cells_of(**{"cluster:a": (18, 13, 19, 12)})
    model = error_model(cells)
    table = KeyTable(
        np.arange(3), np.array([[0.5, 0.0], [0.2, 0.0], [0.9, 0.0]]), np.ones((3, 2)) * [1.0, 0.0]
    )
    result = correct({OVERALL: table}, 3, cells, model, options=BootstrapOptions(n_resamples=300, seed=0))
    assert result.unstable_draws > 0
    assert result.keys[OVERALL].ci_lower is None and result.keys[OVERALL].ci_upper is None
    assert result.metrics()["corrected:unstable_draws"] == result.unstable_draws


# -- simulation: a synthetic judge with known per-category error rates -----------------------------
SE = np.array([0.70, 0.60, 0.75])
SP = np.array([0.95, 0.90, 0.92])
POINTS = np.array([5, 3, 7, 2, -4, 6, 4, -2, 8, 3, 5, -6], dtype=np.float64)
CATEGORY = np.arange(12) % 3
TRUE_MET = np.array([0.6, 0.4, 0.5, 0.7, 0.2, 0.3, 0.6, 0.3, 0.5, 0.8, 0.4, 0.1])
WEIGHT = POINTS / POINTS[POINTS > 0].sum()
TRUE_SCORE = float(WEIGHT @ TRUE_MET)  # the population score every trial estimates
N_CONV, N_META, TRIALS, RESAMPLES = 200, 400, 500, 400


def judge(truth: np.ndarray, category: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    u = rng.random(truth.shape)
    return np.where(truth, u < SE[category], u >= SP[category])


def resample_counts(n: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of ``n`` items is drawn in each of ``n_resamples`` draws of ``n`` with replacement
    (the raw score's plain bootstrap, beside the corrected one)."""
    picks = rng.integers(0, n, size=(n_resamples, n)) + n * np.arange(n_resamples)[:, None]
    return np.bincount(picks.ravel(), minlength=n * n_resamples).reshape(n_resamples, n)


def simulate_trial(rng: np.random.Generator, se: np.ndarray, sp: np.ndarray):
    truth = rng.random((N_CONV, 12)) < TRUE_MET
    u = rng.random(truth.shape)
    verdicts = np.where(truth, u < se[CATEGORY], u >= sp[CATEGORY])
    meta_category = np.repeat(np.arange(3), N_META)
    meta_truth = rng.random(meta_category.size) < 0.5
    u = rng.random(meta_category.size)
    meta_judge = np.where(meta_truth, u < se[meta_category], u >= sp[meta_category])
    cell = np.where(meta_truth, np.where(meta_judge, 0, 1), np.where(meta_judge, 3, 2))
    counts = np.bincount(meta_category * 4 + cell, minlength=12).reshape(3, 4)
    cells = JudgeCells(("cluster:0", "cluster:1", "cluster:2"), counts.astype(np.int64))
    model = error_model(cells)
    assert model.used == cells.categories
    slots = np.zeros((12, 4))
    slots[np.arange(12), CATEGORY] = WEIGHT  # the pooled slot (last) carries no criterion here
    table = KeyTable(np.arange(N_CONV), (verdicts * 1.0) @ slots, np.tile(slots.sum(axis=0), (N_CONV, 1)))
    result = correct(
        {OVERALL: table},
        N_CONV,
        cells,
        model,
        options=BootstrapOptions(n_resamples=RESAMPLES, seed=int(rng.integers(1 << 31))),
    )
    raw_scores = verdicts @ WEIGHT
    boot = resample_counts(N_CONV, RESAMPLES, rng) @ raw_scores / N_CONV
    raw_ci = np.quantile(boot, [0.025, 0.975])
    return result.keys[OVERALL], raw_ci


def test_simulation_corrected_ci_covers_the_true_score_and_raw_does_not() -> None:
    rng = np.random.default_rng(20261123)
    covered = raw_covered = 0
    for _ in range(TRIALS):
        key, raw_ci = simulate_trial(rng, SE, SP)
        assert key.ci_lower is not None and key.ci_upper is not None
        covered += key.ci_lower <= TRUE_SCORE <= key.ci_upper
        raw_covered += raw_ci[0] <= TRUE_SCORE <= raw_ci[1]
    assert 0.92 <= covered / TRIALS <= 0.97, covered
    assert raw_covered / TRIALS < 0.5, raw_covered


def test_simulation_with_a_perfect_judge_changes_nothing() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        key, _ = simulate_trial(rng, np.ones(3), np.ones(3))
        assert key.corrected == key.raw


def test_rates_are_nan_without_rows() -> None:
    se, sp = rates(np.array([[0, 0, 3, 1]]))
    assert np.isnan(se[0]) and sp[0] == 0.75
    assert POOLED == "pooled"
