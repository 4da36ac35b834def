"""Run-level numbers from graded samples, against values worked out by hand."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from rich.console import Console

from healthbench.cli.summary_view import render_summary
from healthbench.data.schema import Conversation
from healthbench.results.summary import SummaryRow, summary_of, summary_rows
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions, sample_metrics, score_run
from healthbench.scoring.stats import BootstrapOptions, aggregate_columns, columns_of

ConversationFactory = Callable[..., Conversation]
SampleFactory = Callable[..., GradedSample]


@pytest.fixture
def run(make_conversation: ConversationFactory, make_sample: SampleFactory) -> list[GradedSample]:
    """Three graded conversations and one with two ungraded criteria."""
    c1 = make_conversation(
        [(10, ["axis:accuracy"]), (10, ["axis:completeness"]), (-5, ["axis:accuracy"])],
        prompt_id="c1",
        example_tags=["theme:a"],
    )
    c2 = make_conversation(
        [(4, ["axis:accuracy"]), (6, ["axis:completeness"])], prompt_id="c2", example_tags=["theme:b"]
    )
    c3 = make_conversation(
        [(8, ["axis:accuracy"]), (2, ["axis:completeness"]), (-10, ["axis:communication_quality"])],
        prompt_id="c3",
        example_tags=["theme:a"],
    )
    c4 = make_conversation(
        [(5, ["axis:accuracy"]), (5, ["axis:accuracy"]), (5, ["axis:completeness"])],
        prompt_id="c4",
        example_tags=["theme:b"],
    )
    return [
        make_sample(c1, [True, False, True]),  # (10 - 5) / 20 = 0.25
        make_sample(c2, [True, True]),  # 10 / 10 = 1.0
        make_sample(c3, [True, False, True]),  # (8 - 10) / 10 = -0.2
        make_sample(c4, [True, None, None]),  # two ungraded criteria: no score at all
    ]


def test_means_and_counts_by_hand(run: list[GradedSample]) -> None:
    result = score_run(run, ScoringOptions(n_resamples=200, seed=0))
    # overall: (0.25 + 1.0 - 0.2) / 3 = 0.35 (c4 is left out)
    assert result.stats[OVERALL].mean == (0.25 + 1.0 + -0.2) / 3
    assert result.stats[OVERALL].n_samples == 3
    # example tags take the overall score: theme:a = (0.25 - 0.2) / 2; theme:b = c2 only
    assert result.stats["theme:a"].mean == (0.25 + -0.2) / 2
    assert (result.stats["theme:a"].n_samples, result.stats["theme:b"].n_samples) == (2, 1)
    assert result.stats["theme:b"].mean == 1.0
    # axis:accuracy: c1 (10 - 5) / 10 = 0.5, c2 4 / 4 = 1.0, c3 8 / 8 = 1.0
    assert result.stats["axis:accuracy"].mean == (0.5 + 1.0 + 1.0) / 3
    # axis:completeness: c1 0 / 10, c2 6 / 6, c3 0 / 2
    assert result.stats["axis:completeness"].mean == 1 / 3
    # axis:communication_quality has only a negative criterion: never scored
    assert "axis:communication_quality" not in result.stats
    # simple-evals' separate "score" key holds the same values as overall_score
    assert result.stats["score"].mean == result.stats[OVERALL].mean
    assert result.score == result.stats[OVERALL].mean


def test_ungraded_samples_are_counted_and_left_out(run: list[GradedSample]) -> None:
    result = score_run(run, ScoringOptions(n_resamples=10))
    assert (result.ungraded_criteria, result.ungraded_samples, result.n_samples) == (2, 1, 4)
    assert result.per_sample[3] is None
    assert result.per_sample[0] == {
        OVERALL: 0.25,
        "theme:a": 0.25,
        "axis:accuracy": 0.5,
        "axis:completeness": 0.0,
    }
    metrics = result.metrics()
    assert (metrics["n_samples"], metrics["ungraded_criteria"], metrics["ungraded_samples"]) == (4, 2, 1)


def test_mean_is_clipped_but_per_sample_values_are_not(
    make_conversation: ConversationFactory, make_sample: SampleFactory
) -> None:
    low = make_conversation([(5, ["axis:accuracy"]), (-10, ["axis:accuracy"])], prompt_id="low")
    high = make_conversation([(4, ["axis:accuracy"])], prompt_id="high")
    samples = [make_sample(low, [False, True]), make_sample(high, [True])]
    result = score_run(samples, ScoringOptions(n_resamples=50))
    # low: -10 / 5 = -2.0; high: 1.0; mean -0.5 -> clipped to 0.0
    assert [m[OVERALL] for m in result.per_sample if m] == [-2.0, 1.0]
    assert result.stats[OVERALL].mean == 0.0
    boot = result.stats[OVERALL]
    assert 0.0 <= boot.ci_lower <= boot.ci_upper <= 1.0


def test_overall_score_length_adjusted_by_hand(
    make_conversation: ConversationFactory, make_sample: SampleFactory
) -> None:
    half = make_conversation([(5, []), (5, [])], prompt_id="half")
    quarter = make_conversation([(1, []), (3, [])], prompt_id="quarter")
    samples = [
        make_sample(half, [True, False], completion="x" * 1500),
        make_sample(quarter, [True, False], completion="y" * 500),
    ]
    options = ScoringOptions(n_resamples=20, length_penalty=0.1, length_center=1000)
    result = score_run(samples, options)
    # half: 0.5 - 0.1 * (1500 - 1000) / 500 = 0.4; quarter: 0.25 - 0.1 * (500 - 1000) / 500 = 0.35
    per_sample = [m["overall_score_length_adjusted"] for m in result.per_sample if m]
    assert per_sample == pytest.approx([0.4, 0.35], abs=1e-15)
    assert result.stats["overall_score_length_adjusted"].mean == pytest.approx(0.375, abs=1e-15)
    assert result.metrics()["overall_score_length_adjusted:n_samples"] == 2


def test_length_adjusted_mean_is_clipped_at_one(
    make_conversation: ConversationFactory, make_sample: SampleFactory
) -> None:
    full = make_conversation([(5, [])], prompt_id="full")
    options = ScoringOptions(n_resamples=20, length_penalty=0.5, length_center=1000)
    result = score_run([make_sample(full, [True], completion="")], options)
    # 1.0 + 0.5 * 1000 / 500 = 2.0 per sample; the run's mean is clipped to 1.0
    assert result.per_sample[0] is not None and result.per_sample[0]["overall_score_length_adjusted"] == 2.0
    assert result.stats["overall_score_length_adjusted"].mean == 1.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (ScoringOptions(length_penalty=0.1), "needs both"),
        (ScoringOptions(length_center=2000), "needs both"),
        (ScoringOptions(length_penalty=-0.1, length_center=2000), ">= 0"),
        (ScoringOptions(length_penalty=0.1, length_center=-1), ">= 0"),
    ],
)
def test_length_adjustment_needs_both_settings_non_negative(
    run: list[GradedSample], options: ScoringOptions, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        score_run(run, options)


def test_length_adjustment_with_professional_defaults_by_hand(
    make_conversation: ConversationFactory, make_sample: SampleFactory
) -> None:
    # upstream Professional: center 2,000 characters, 0.0147 per 500 characters
    conv = make_conversation([(4, []), (4, []), (-2, [])], prompt_id="p")
    samples = [
        make_sample(conv, [True, False, False], completion="a" * 3000),  # 0.5 - 0.0147 * 2 = 0.4706
        make_sample(conv, [True, True, True], completion="b" * 1000, repeat=1),  # 0.75 + 0.0147 * 2 = 0.7794
        make_sample(conv, [False, False, False], completion="c" * 2000, repeat=2),  # 0.0 - 0 = 0.0
    ]
    options = ScoringOptions(n_resamples=0, length_penalty=0.0147, length_center=2000)
    per_sample = [m["overall_score_length_adjusted"] for m in score_run(samples, options).per_sample if m]
    assert per_sample == pytest.approx([0.4706, 0.7794, 0.0], abs=1e-12)
    metrics = score_run(samples, options).metrics()
    assert metrics["overall_score_length_adjusted"] == pytest.approx((0.4706 + 0.7794) / 3, abs=1e-12)
    assert list(metrics)[:5] == [
        "overall_score",
        "overall_score:n_samples",
        "overall_score:bootstrap_std",
        "overall_score:ci_lower",
        "overall_score:ci_upper",
    ]


def test_error_rate_is_one_minus_the_score_with_flipped_ci(run: list[GradedSample]) -> None:
    result = score_run(run, ScoringOptions(n_resamples=300, seed=3, error_rate=True))
    metrics = result.metrics()
    overall = result.stats[OVERALL]
    # 1 - 0.35 = 0.65; the CI flips: [1 - upper, 1 - lower]
    assert metrics["error_rate"] == 1.0 - overall.mean
    assert metrics["error_rate:ci_lower"] == 1.0 - overall.ci_upper
    assert metrics["error_rate:ci_upper"] == 1.0 - overall.ci_lower
    assert "error_rate" not in score_run(run, ScoringOptions(n_resamples=10)).metrics()


def test_metrics_key_families(run: list[GradedSample]) -> None:
    metrics = score_run(run, ScoringOptions(n_resamples=100)).metrics()
    suffixes = ("", ":n_samples", ":bootstrap_std", ":ci_lower", ":ci_upper")
    for key in (OVERALL, "theme:a", "theme:b", "axis:accuracy", "axis:completeness", "score"):
        assert all(f"{key}{suffix}" in metrics for suffix in suffixes), key
    assert metrics["score:n_samples"] == 3
    # score's family comes after every other metric, then the run counts
    assert list(metrics)[-8:] == [
        "score",
        "score:n_samples",
        "score:bootstrap_std",
        "score:ci_lower",
        "score:ci_upper",
        "n_samples",
        "ungraded_criteria",
        "ungraded_samples",
    ]
    assert list(metrics)[:5] == [f"{OVERALL}{suffix}" for suffix in suffixes]


def test_same_seed_same_numbers_different_seed_different_std(run: list[GradedSample]) -> None:
    first = score_run(run, ScoringOptions(n_resamples=500, seed=11)).metrics()
    assert score_run(run, ScoringOptions(n_resamples=500, seed=11)).metrics() == first
    other = score_run(run, ScoringOptions(n_resamples=500, seed=12)).metrics()
    assert other[OVERALL] == first[OVERALL]
    assert other[f"{OVERALL}:bootstrap_std"] != first[f"{OVERALL}:bootstrap_std"]


def test_no_resamples_gives_means_without_std(run: list[GradedSample]) -> None:
    result = score_run(run, ScoringOptions(n_resamples=0))
    assert result.stats[OVERALL].mean == (0.25 + 1.0 + -0.2) / 3
    assert math.isnan(result.stats[OVERALL].bootstrap_std) and math.isnan(result.stats[OVERALL].ci_lower)


def test_repeats_are_separate_samples(
    make_conversation: ConversationFactory, make_sample: SampleFactory
) -> None:
    conversation = make_conversation([(2, []), (2, [])], prompt_id="twice")
    samples = [make_sample(conversation, [True, True]), make_sample(conversation, [True, False], repeat=1)]
    result = score_run(samples, ScoringOptions(n_resamples=10))
    # (1.0 + 0.5) / 2
    assert (result.stats[OVERALL].mean, result.stats[OVERALL].n_samples) == (0.75, 2)


def test_a_run_with_nothing_graded(
    make_conversation: ConversationFactory, make_sample: SampleFactory
) -> None:
    conversation = make_conversation([(5, [])], prompt_id="lost")
    result = score_run([make_sample(conversation, [None])])
    assert isinstance(result, RunScore) and result.stats == {} and result.score is None
    assert result.metrics() == {"score": None, "n_samples": 1, "ungraded_criteria": 1, "ungraded_samples": 1}


def test_graded_sample_checks_verdict_count(
    make_conversation: ConversationFactory, make_sample: SampleFactory
) -> None:
    with pytest.raises(ValueError, match="1 verdicts for 2 criteria"):
        make_sample(make_conversation([(5, []), (5, [])], prompt_id="short"), [True])


def test_summary_rows_and_rendering(run: list[GradedSample]) -> None:
    result = score_run(run, ScoringOptions(n_resamples=100, seed=0, error_rate=True))
    rows = summary_rows(result)
    overall = result.stats[OVERALL]
    assert rows[0] == SummaryRow("overall", OVERALL, overall.mean, overall.ci_lower, overall.ci_upper, 3)
    assert rows[1].key == "error_rate" and rows[1].mean == 1.0 - overall.mean
    assert [(r.section, r.label, r.n_samples) for r in rows[2:]] == [
        ("theme", "a", 2),
        ("theme", "b", 1),
        ("axis", "accuracy", 3),
        ("axis", "completeness", 3),
    ]
    console = Console(record=True, width=100, color_system="truecolor")
    render_summary(summary_of(result), title="run [demo]", console=console)
    text = console.export_text(clear=False)
    assert "run [demo]" in text and "By theme" in text and "By axis" in text and "95% CI" in text
    assert "ungraded: 2 criteria in 1 of 4 samples (left out of every score)" in text
    assert "\x1b[1;31m" in console.export_text(styles=True)  # the ungraded line is red when > 0


def test_summary_without_resamples_shows_no_interval(run: list[GradedSample]) -> None:
    console = Console(record=True, width=100)
    summary = summary_of(score_run(run[:3], ScoringOptions(n_resamples=0)))
    render_summary(summary, title="t", console=console)
    text = console.export_text()
    assert "ungraded: 0 criteria in 0 of 3 samples" in text and "[0." not in text
    assert math.isnan(summary.rows[0].ci_lower)


def random_run(
    make_conversation: ConversationFactory,
    make_sample: SampleFactory,
    seed: int,
    rubric_tags: tuple[str, ...] = ("axis:accuracy", "axis:completeness", "cluster:x", "level:example"),
) -> list[GradedSample]:
    """Random graded samples: themes and categories, overlapping rubric tags, some ungraded criteria."""
    rng = random.Random(seed)
    samples = []
    for index in range(80):
        items = [
            (
                rng.choice([-5, 1, 2, 3, 5, 10]),
                rng.sample(rubric_tags, rng.randint(0, min(2, len(rubric_tags)))),
            )
            for _ in range(rng.randint(1, 6))
        ]
        items.append((4, [rubric_tags[0]]))
        theme = rng.choice("abc")
        conversation = make_conversation(
            items,
            prompt_id=f"r{index}",
            example_tags=[f"theme:{theme}", f"category:{theme}{rng.randint(0, 1)}"],
        )
        met = [None if rng.random() < 0.02 else rng.random() < 0.6 for _ in items]
        samples.append(make_sample(conversation, met, completion="x" * rng.randint(100, 3000)))
    return samples


@pytest.mark.parametrize(
    ("options", "rubric_tags"),
    [
        (ScoringOptions(n_resamples=300, seed=4), ("axis:accuracy", "axis:completeness", "cluster:x")),
        (ScoringOptions(n_resamples=300, seed=5, length_penalty=0.05, length_center=800), ("axis:accuracy",)),
        (ScoringOptions(n_resamples=300, seed=6), ("axis:accuracy", "score")),  # a tag named "score"
    ],
)
def test_score_run_is_aggregate_of_sample_metrics(
    make_conversation: ConversationFactory,
    make_sample: SampleFactory,
    options: ScoringOptions,
    rubric_tags: tuple[str, ...],
) -> None:
    # the batch path gives the same per-sample metrics, the same keys in the same order, and (laid
    # out the same way) the very same bootstrap bits as the one-sample-at-a-time definition
    samples = random_run(make_conversation, make_sample, 7, rubric_tags)
    result = score_run(samples, options)
    per_sample = [sample_metrics(s, options) for s in samples]
    assert result.per_sample == per_sample
    rows = [dict(m, score=m[OVERALL]) for m in per_sample if m is not None]
    bootstrap = BootstrapOptions(n_resamples=options.n_resamples, seed=options.seed)
    expected = aggregate_columns(columns_of(rows), len(rows), options=bootstrap)
    assert list(result.stats) == list(expected)
    assert result.stats == expected
    assert result.ungraded_criteria == sum(s.ungraded for s in samples)
    assert result.ungraded_samples == sum(m is None for m in per_sample)
