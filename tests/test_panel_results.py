"""A panel of judges' run read back (docs/panels.md, docs/metrics.md): the panel's verdicts by each
rule, each member's own scores, the agreement figures and every export, checked against independent
computations. The run is written straight into a store (no model call): three members' grade rows on
5 conversations x 2 repeats, with a failed sample, grades missing for some members and a member's
ungraded verdict, so every path of the panel rules shows."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import build_conversation
from typer.testing import CliRunner, Result

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.data.schema import Conversation
from healthbench.results.simple_evals import read_allresults
from healthbench.results.views import RunView
from healthbench.runner.run import stored_record
from healthbench.scoring.panel import Calibration, MemberRates
from healthbench.scoring.run_score import GradedSample, score_run
from healthbench.scoring.verdict import Verdict
from healthbench.store import Store
from healthbench.store.runs import GradeRow, SampleRow

MEMBERS = ["openai/judge-a", "openai/judge-b", "openai/judge-c"]
CONVERSATIONS = [
    build_conversation(
        [
            (5, ["axis:accuracy", "cluster:x"]),
            (3, ["axis:completeness"]),
            (-2, ["axis:accuracy", "cluster:y"]),
        ],
        prompt_id=f"c{n}",
        example_tags=["theme:hedging" if n % 2 else "theme:emergency_referrals"],
        question=f"question {n}",
    )
    for n in range(5)
]
N_REPEATS = 2
FAILED = ("c4", 1)  # its sample failed: every criterion ungraded whatever the members say
STATUSES = ("met", "not_met", "ungraded", None)  # None: no grade row stored for that member


def _statuses(seed: int = 7) -> dict[tuple[str, int, int, str], str | None]:
    """(prompt_id, repeat, criterion, member) -> a stored status, drawn at random (mostly graded)."""
    rng = random.Random(seed)
    out: dict[tuple[str, int, int, str], str | None] = {}
    for conversation in CONVERSATIONS:
        for repeat in range(N_REPEATS):
            for index in range(len(conversation.rubrics)):
                for label in MEMBERS:
                    out[(conversation.prompt_id, repeat, index, label)] = rng.choices(
                        STATUSES, weights=(45, 45, 5, 5)
                    )[0]
    return out


STATUS = _statuses()


def _write_run(store: Store, name: str, judges: Sequence[str], **scoring: Any) -> None:
    config = build_config(
        {
            "dataset": "demo",
            "n_repeats": N_REPEATS,
            "judges": [{"spec": label} for label in judges],
            "scoring": {"n_resamples": 50, **scoring},
        }
    )
    record = stored_record(config, kind="eval", dataset={"variant": "demo"}, template_sha="abc")
    run = store.create_run(
        name, "eval", record, [(c.prompt_id, c.model_dump(mode="json")) for c in CONVERSATIONS]
    )
    samples, grades = [], []
    for conversation in CONVERSATIONS:
        for repeat in range(N_REPEATS):
            failed = (conversation.prompt_id, repeat) == FAILED
            samples.append(
                SampleRow(
                    conversation.prompt_id,
                    repeat,
                    None,
                    0.01,
                    False,
                    "HTTP 500" if failed else None,
                    None if failed else f"answer {conversation.prompt_id} {repeat}",
                    [{"role": "user", "content": conversation.prompt[0].content}],
                )
            )
            for index in range(len(conversation.rubrics)):
                for label in judges:
                    status = STATUS[(conversation.prompt_id, repeat, index, label)]
                    if status is None:
                        continue
                    grades.append(
                        GradeRow(
                            conversation.prompt_id,
                            repeat,
                            {"input_tokens": 10, "output_tokens": 2},
                            0.001,
                            False,
                            None,
                            index,
                            status,
                            f"{label} says {status}",
                            1,
                            "{}",
                            judge=label,
                        )
                    )
    store.put(run.id, samples=samples, grades=grades)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "runs.db")
    _write_run(s, "panel", MEMBERS)
    _write_run(s, "single", MEMBERS[:1])
    yield s
    s.close()


# ---------------------------------------------------------------- independent computations


def _member_verdicts(prompt_id: str, repeat: int, index: int) -> list[Verdict]:
    if (prompt_id, repeat) == FAILED:
        return [Verdict.UNGRADED] * len(MEMBERS)
    names = {
        "met": Verdict.MET,
        "not_met": Verdict.NOT_MET,
        "ungraded": Verdict.UNGRADED,
        None: Verdict.UNGRADED,
    }
    return [names[STATUS[(prompt_id, repeat, index, label)]] for label in MEMBERS]


def _majority(votes: list[Verdict]) -> Verdict:
    graded = [v for v in votes if v is not Verdict.UNGRADED]
    if 2 * len(graded) <= len(votes):
        return Verdict.UNGRADED
    met = graded.count(Verdict.MET)
    if 2 * met == len(graded):
        return graded[0]  # the tie: the first graded member (the chair when it graded)
    return Verdict.MET if 2 * met > len(graded) else Verdict.NOT_MET


def _unanimous(votes: list[Verdict]) -> Verdict:
    graded = [v for v in votes if v is not Verdict.UNGRADED]
    if 2 * len(graded) <= len(votes):
        return Verdict.UNGRADED
    return Verdict.MET if all(v is Verdict.MET for v in graded) else Verdict.NOT_MET


def _any(votes: list[Verdict]) -> Verdict:
    graded = [v for v in votes if v is not Verdict.UNGRADED]
    if 2 * len(graded) <= len(votes):
        return Verdict.UNGRADED
    return Verdict.MET if Verdict.MET in graded else Verdict.NOT_MET


CALIBRATION = Calibration(
    rates={
        "openai/judge-a": {
            None: MemberRates(0.9, 0.6, 100, 100),
            "cluster:x": MemberRates(0.55, 0.95, 40, 40),
        },
        "openai/judge-b": {None: MemberRates(0.7, 0.7, 100, 100), "cluster:x": MemberRates(0.8, 0.6, 40, 40)},
        "openai/judge-c": {
            None: MemberRates(0.6, 0.8, 100, 100),
            "cluster:x": MemberRates(0.97, 0.9, 40, 40),
        },
    },
    base_rate={None: 0.6, "cluster:x": 0.3},
)


def _calibrated(votes: list[Verdict], tags: Sequence[str], calibration: Calibration = CALIBRATION) -> Verdict:
    graded = [v for v in votes if v is not Verdict.UNGRADED]
    if 2 * len(graded) <= len(votes):
        return Verdict.UNGRADED
    category = next((t for t in tags if t.startswith("cluster:")), None)
    base = calibration.base_rate.get(category, calibration.base_rate[None])
    log_odds = math.log(base / (1 - base))
    for label, vote in zip(MEMBERS, votes, strict=True):
        rates = calibration.rates[label].get(category, calibration.rates[label][None])
        se, sp = rates.sensitivity, rates.specificity
        if vote is Verdict.MET:
            log_odds += math.log(se / (1 - sp))
        elif vote is Verdict.NOT_MET:
            log_odds += math.log((1 - se) / sp)
    if abs(log_odds) < 1e-12:
        return _majority(votes)
    return Verdict.MET if log_odds > 0 else Verdict.NOT_MET


def _samples(rule: Any, calibration: Calibration = CALIBRATION) -> list[GradedSample]:
    """The run's samples with verdicts by ``rule`` (a function of the members' votes, or a member's
    index; `_calibrated` weighs them by ``calibration``)."""
    out = []
    for repeat in range(N_REPEATS):
        for conversation in CONVERSATIONS:
            verdicts = []
            for index, item in enumerate(conversation.rubrics):
                votes = _member_verdicts(conversation.prompt_id, repeat, index)
                if isinstance(rule, int):
                    verdicts.append(votes[rule])
                elif rule is _calibrated:
                    verdicts.append(_calibrated(votes, item.tags, calibration))
                else:
                    verdicts.append(rule(votes))
            out.append(_sample(conversation, repeat, tuple(verdicts)))
    return out


def _sample(conversation: Conversation, repeat: int, verdicts: tuple[Verdict, ...]) -> GradedSample:
    failed = (conversation.prompt_id, repeat) == FAILED
    return GradedSample(
        conversation=conversation,
        completion="" if failed else f"answer {conversation.prompt_id} {repeat}",
        verdicts=verdicts,
        repeat=repeat,
    )


def _agreement() -> tuple[float, int]:
    complete = [
        votes
        for conversation in CONVERSATIONS
        for repeat in range(N_REPEATS)
        for index in range(len(conversation.rubrics))
        if Verdict.UNGRADED not in (votes := _member_verdicts(conversation.prompt_id, repeat, index))
    ]
    return sum(len(set(votes)) == 1 for votes in complete) / len(complete), len(complete)


def results_cli(tmp_path: Path, name: str, *flags: str) -> Result:
    return CliRunner().invoke(app, ["results", name, "--store", str(tmp_path / "runs.db"), *flags])


def _metrics(tmp_path: Path, name: str, *flags: str) -> dict[str, Any]:
    out = tmp_path / f"{name}-{'-'.join(flags) or 'stored'}.json"
    result = results_cli(tmp_path, name, "--metrics-out", str(out), *flags)
    assert result.exit_code == 0, result.output
    metrics: dict[str, Any] = json.loads(out.read_text())
    return metrics


# ---------------------------------------------------------------- tests


def test_the_fixture_has_ties_splits_and_ungraded_criteria() -> None:
    """(So that the rules below are tested where they differ.)"""
    votes = [
        _member_verdicts(c.prompt_id, r, i)
        for c in CONVERSATIONS
        for r in range(N_REPEATS)
        for i in range(len(c.rubrics))
        if (c.prompt_id, r) != FAILED
    ]
    assert any(v.count(Verdict.UNGRADED) == 1 and Verdict.MET in v and Verdict.NOT_MET in v for v in votes)
    assert any(Verdict.UNGRADED not in v and len(set(v)) == 2 for v in votes)
    assert any(_majority(v) != _unanimous(v) for v in votes) and any(_majority(v) != _any(v) for v in votes)
    assert any(_calibrated(v, c.rubrics[i].tags) != _majority(v) for v, c, i in _with_items())


def _with_items() -> list[tuple[list[Verdict], Conversation, int]]:
    return [
        (_member_verdicts(c.prompt_id, r, i), c, i)
        for c in CONVERSATIONS
        for r in range(N_REPEATS)
        for i in range(len(c.rubrics))
        if (c.prompt_id, r) != FAILED
    ]


def test_a_panels_metrics_are_the_per_criterion_majoritys_and_each_members_own(
    store: Store, tmp_path: Path
) -> None:
    metrics = _metrics(tmp_path, "panel")
    options = RunView.open(store, "panel").scoring_options()
    expected = score_run(_samples(_majority), options).metrics()
    assert {key: metrics[key] for key in expected} == pytest.approx(expected, nan_ok=True)
    assert metrics["overall_score"] == expected["overall_score"]  # exactly
    for number, label in enumerate(MEMBERS):
        own = score_run(_samples(number), options)
        assert metrics[f"judge:{label}:overall_score"] == own.stats["overall_score"].mean
        for axis in ("accuracy", "completeness"):
            assert metrics[f"judge:{label}:axis:{axis}"] == own.stats[f"axis:{axis}"].mean
    share, _ = _agreement()
    assert metrics["judge_agreement"] == share
    assert metrics["panel_rule"] == "majority"
    assert -1.0 <= metrics["judge_fleiss_kappa"] <= 1.0


@pytest.mark.parametrize("rule", ["unanimous", "any", "majority"])
def test_results_panel_recombines_the_stored_verdicts(store: Store, tmp_path: Path, rule: str) -> None:
    combine = {"unanimous": _unanimous, "any": _any, "majority": _majority}[rule]
    metrics = _metrics(tmp_path, "panel", "--panel", rule)
    expected = score_run(_samples(combine), RunView.open(store, "panel").scoring_options()).metrics()
    assert metrics["overall_score"] == expected["overall_score"]
    assert {key: metrics[key] for key in expected} == pytest.approx(expected, nan_ok=True)
    assert metrics["panel_rule"] == rule


def test_the_calibrated_rule_weighs_members_by_their_rates(store: Store) -> None:
    view = RunView.open(store, "panel").with_panel("calibrated", CALIBRATION)
    got = view.graded_samples()
    want = _samples(_calibrated)
    assert [s.verdicts for s in got] == [s.verdicts for s in want]
    from healthbench.results.panel_scores import UNCATEGORISED, panel_figures

    figures = panel_figures(view, list(view.iter_samples()), view.scoring_options())
    assert figures is not None
    # cluster:y has no rates of its own, nor do criteria without a category: the pooled ones stood in
    assert figures.pooled == (UNCATEGORISED, "cluster:y")
    assert "pooled rates stood in for (no category), cluster:y" in (figures.pooled_line() or "")


def test_results_calibrate_with_stored_meta_eval_runs(store: Store, tmp_path: Path) -> None:
    """One meta-eval run of the three members (tests/panel_meta_runs.py): `results --calibrate-with`
    weighs them by the rates it measured, and a run that stores the rule and its runs needs no flag."""
    from panel_meta_runs import drawn_verdicts, meta_rows, stored_panel_meta, write_rows

    from healthbench.results.calibration import load_calibration

    rows = meta_rows()
    verdicts = {
        label: drawn_verdicts(rows, error, seed)
        for label, error, seed in zip(MEMBERS, (0.1, 0.3, 0.4), (1, 2, 3), strict=True)
    }
    stored_panel_meta(store, write_rows(tmp_path / "meta.jsonl", rows), verdicts, name="meta")
    calibration = load_calibration(store, ["meta"])
    expected = score_run(
        _samples(_calibrated, calibration), RunView.open(store, "panel").scoring_options()
    ).metrics()
    metrics = _metrics(tmp_path, "panel", "--calibrate-with", "meta")
    assert metrics["panel_rule"] == "calibrated"
    assert {key: metrics[key] for key in expected} == pytest.approx(expected, nan_ok=True)
    assert metrics["overall_score"] == expected["overall_score"]
    _write_run(store, "stored-rule", MEMBERS, panel="calibrated", calibrate_with=["meta"])
    assert _metrics(tmp_path, "stored-rule")["overall_score"] == expected["overall_score"]
    # the run's categories are not the meta-eval's: the output says the pooled rates stood in
    result = results_cli(tmp_path, "panel", "--calibrate-with", "meta")
    assert "pooled rates stood in for (no category), cluster:x, cluster:y" in " ".join(result.output.split())
    result = results_cli(tmp_path, "panel", "--panel", "any", "--calibrate-with", "meta")
    assert result.exit_code != 0 and "--panel calibrated" in result.output
    # a member no meta-eval run measured: one line naming it
    stored_panel_meta(store, tmp_path / "meta.jsonl", {MEMBERS[0]: verdicts[MEMBERS[0]]}, name="meta-a")
    result = results_cli(tmp_path, "panel", "--calibrate-with", "meta-a")
    assert result.exit_code != 0 and f"no meta-eval run measured judge {MEMBERS[1]!r}" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_the_calibrated_rule_without_a_calibration_is_one_line(store: Store, tmp_path: Path) -> None:
    result = results_cli(tmp_path, "panel", "--panel", "calibrated")
    assert result.exit_code != 0
    assert "--calibrate-with" in result.output and len(result.output.strip().splitlines()) == 1
    result = results_cli(tmp_path, "panel", "--panel", "best")
    assert result.exit_code != 0 and "--panel 'best'" in result.output


def test_each_stored_sample_carries_every_members_verdicts(store: Store) -> None:
    stored = list(RunView.open(store, "panel").iter_samples())
    first = stored[0]
    assert list(first.members) == MEMBERS
    for number, label in enumerate(MEMBERS):
        expected = tuple(_member_verdicts("c0", 0, i)[number] for i in range(3))
        assert first.members[label].verdicts == expected
        status = STATUS[("c0", 0, 0, label)]
        if status is not None:
            assert first.members[label].explanations[0] == f"{label} says {status}"
            assert f"[{label}: {status}] {label} says {status}" in (first.graded.explanations[0] or "")


def test_a_single_judge_reads_as_before(store: Store, tmp_path: Path) -> None:
    metrics = _metrics(tmp_path, "single")
    view = RunView.open(store, "single")
    assert not view.is_panel and view.members == MEMBERS[:1]
    expected = score_run(_samples(0), view.scoring_options()).metrics()
    assert {key: metrics[key] for key in expected} == pytest.approx(expected, nan_ok=True)
    assert not [key for key in metrics if key.startswith(("judge:", "judge_", "panel_"))]
    samples = view.graded_samples()
    assert samples[0].explanations[0] == f"{MEMBERS[0]} says {STATUS[('c0', 0, 0, MEMBERS[0])]}"


def test_the_summary_shows_each_member_and_the_agreement(store: Store, tmp_path: Path) -> None:
    result = results_cli(tmp_path, "panel")
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())  # (rich folds long lines)
    assert "By judge" in output and "By judge and axis" in output
    for label in MEMBERS:
        assert label in output
    share, complete = _agreement()
    assert f"judge_agreement {share:.4f} over {complete:,} criteria graded by every member" in output
    assert "judges openai/judge-a, openai/judge-b, openai/judge-c (rule majority)" in output


def test_the_allresults_export_carries_the_members_beside_the_panel(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "all.json"
    result = results_cli(tmp_path, "panel", "--allresults-out", str(path), "--panel", "any")
    assert result.exit_code == 0, result.output
    document = json.loads(path.read_text())
    examples = document["metadata"]["example_level_metadata"]
    first = examples[0]["rubric_items"][0]
    votes = _member_verdicts("c0", 0, 0)
    assert first["criteria_met"] == _any(votes).criteria_met
    assert first["judge_verdicts"] == {label: v.criteria_met for label, v in zip(MEMBERS, votes, strict=True)}
    # our reader reads it back: the panel's verdicts
    back = read_allresults(path)
    assert [s.verdicts for s in back] == [s.verdicts for s in _samples(_any)]


def test_the_row_scores_and_aggregate_score_each_member(store: Store, tmp_path: Path) -> None:
    rows_path, agg_path, metrics_path = tmp_path / "rows.jsonl", tmp_path / "agg.json", tmp_path / "m.json"
    result = results_cli(
        tmp_path,
        "panel",
        *("--row-scores-out", str(rows_path), "--aggregate-out", str(agg_path)),
        *("--metrics-out", str(metrics_path)),
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    options = RunView.open(store, "panel").scoring_options()
    for number, label in enumerate(MEMBERS):
        own = score_run(_samples(number), options)
        key = f"judge:{label}:overall_score"
        values = [row["metrics"][f"healthbench/{key}"][0]["value"] for row in rows]
        assert values == [m["overall_score"] if m is not None else None for m in own.per_sample]
    first = rows[0]["criteria"][0]
    assert first["judge_verdicts"] == {
        label: {"met": "met", "not_met": "not_met"}.get(str(STATUS[("c0", 0, 0, label)]), "ungraded")
        for label in MEMBERS
    }
    aggregate = json.loads(agg_path.read_text())
    metrics = json.loads(metrics_path.read_text())
    by_ref = {m["metric_ref"]: m["aggregation"]["scores"][0] for m in aggregate["metrics"]}
    for label in MEMBERS:
        assert (
            by_ref[f"healthbench/judge:{label}:overall_score"]["score"]
            == metrics[f"judge:{label}:overall_score"]
        )


def test_the_inspect_log_scores_each_member_and_the_panel(store: Store, tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    from inspect_ai.log import read_eval_log

    path = tmp_path / "log.json"
    result = results_cli(tmp_path, "panel", "--inspect-log-out", str(path))
    assert result.exit_code == 0, result.output
    log = read_eval_log(str(path))
    assert log.results is not None
    names = [score.name for score in log.results.scores]
    assert names == ["healthbench", *(f"judge:{label}" for label in MEMBERS)]
    options = RunView.open(store, "panel").scoring_options()
    for number in range(len(MEMBERS)):
        member = log.results.scores[number + 1]
        assert (
            member.metrics["overall_score"].value
            == score_run(_samples(number), options).stats["overall_score"].mean
        )
    assert log.samples is not None
    sample = log.samples[0]
    assert sample.scores is not None and set(sample.scores) == {
        "healthbench",
        *(f"judge:{m}" for m in MEMBERS),
    }


def test_a_single_judges_exports_carry_no_member_keys(store: Store, tmp_path: Path) -> None:
    all_path, rows_path = tmp_path / "all.json", tmp_path / "rows.jsonl"
    result = results_cli(
        tmp_path, "single", "--allresults-out", str(all_path), "--row-scores-out", str(rows_path)
    )
    assert result.exit_code == 0, result.output
    assert "judge_verdicts" not in all_path.read_text() and "judge:" not in rows_path.read_text()
    assert "By judge" not in result.output and "judge_agreement" not in result.output
    back = read_allresults(all_path)
    assert [s.verdicts for s in back] == [s.verdicts for s in _samples(0)]


def test_runs_lists_every_member_of_a_panel(store: Store, tmp_path: Path) -> None:
    assert RunView.open(store, "panel").judge_specs == MEMBERS
    assert RunView.open(store, "single").judge_specs == MEMBERS[:1]
    result = CliRunner().invoke(app, ["runs", "--store", str(tmp_path / "runs.db")])
    assert result.exit_code == 0, result.output
    assert result.output.count(" + ") >= 2  # (the column folds long names)
