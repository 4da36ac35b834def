"""`healthbench results NAME` prints figures remembered in the store (results/figures.py) when they
were computed from the run as it is now with the same options, byte for byte what scoring prints;
any write of the run's samples or grades (its revision) or other options make it score again."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import build_conversation, build_sample, judged_run_args
from sqlalchemy import text
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import RunConfig
from healthbench.errors import StoreError
from healthbench.grading.template import load_template
from healthbench.results.figures import FIGURES, RunFigures, figures_key, run_figures
from healthbench.results.views import RunView
from healthbench.runner.imported import _grades, _sample
from healthbench.runner.run import stored_record
from healthbench.scoring.run_score import GradedSample
from healthbench.store import Store
from healthbench.store.runs import GradeRow, GradeStatus, SampleRow

cli = CliRunner()
THEMES = ("emergency_referrals", "global_health", "hedging")
AXES = ("accuracy", "completeness", "communication_quality")


def graded_samples(n: int, *, repeats: int = 1, seed: int = 0) -> list[GradedSample]:
    """``n`` conversations with themes and axes, ``repeats`` answers each, a few criteria ungraded."""
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        points = [rng.choice([-5, -2, 3, 5, 8]) for _ in range(rng.randint(1, 4))] + [rng.choice([1, 4, 7])]
        items = [(p, [f"axis:{rng.choice(AXES)}"]) for p in points]  # (the last point is positive)
        conversation = build_conversation(
            items, prompt_id=f"c{i:03d}", example_tags=[f"theme:{THEMES[i % len(THEMES)]}"]
        )
        for repeat in range(repeats):
            met: list[bool | None] = [rng.random() < 0.5 for _ in items]
            if i == 1:
                met[0] = None  # ungraded: the warning line and the red ungraded line
            completion = "x" * rng.randint(100, 2000)
            samples.append(build_sample(conversation, met, completion=completion, repeat=repeat))
    return samples


def store_run(store: Store, name: str, samples: Sequence[GradedSample], **settings: Any) -> None:
    """``samples`` stored as a finished eval run with the run settings ``settings`` (as
    `healthbench.runner.imported.store_imported` stores an imported file, with other settings)."""
    conversations = {s.conversation.prompt_id: s.conversation for s in samples}
    config = RunConfig.model_validate(
        {"model": None, "judge": {"spec": "openai/gpt-4.1"}, "n_repeats": max(s.repeat for s in samples) + 1}
        | settings
    )
    record = stored_record(
        config, kind="eval", dataset={"variant": "t"}, template_sha=load_template(None).sha256
    )
    run = store.create_run(
        name, "eval", record, [(p, c.model_dump(mode="json")) for p, c in conversations.items()]
    )
    store.put(
        run.id,
        samples=[_sample(s) for s in samples],
        grades=[g for s in samples for g in _grades(s)],
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "runs.db"
    s = Store(path)
    store_run(s, "plain", graded_samples(24))
    store_run(s, "repeats", graded_samples(12, repeats=3, seed=1))  # CIs over conversations: unit line
    store_run(s, "consensus", graded_samples(15, seed=2), dataset="consensus")  # error_rate row
    store_run(
        s,
        "length",
        graded_samples(15, seed=3),
        scoring={"length_penalty": 0.01, "length_center": 1000},  # the length-adjusted row
    )
    partial = s.require_run("plain")  # a failed answer: PARTIAL, 23 of 24 answered
    s.put(partial.id, samples=[SampleRow("c005", 0, None, None, False, "HTTP 500", None, None)])
    s.close()
    yield path


def results(store: Path, name: str, *args: str) -> tuple[str, str]:
    result = cli.invoke(app, ["results", name, "--store", str(store), *args])
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


OPTIONS = (
    (),
    ("--seed", "7"),
    ("--n-resamples", "0"),  # no CI: "-"
    ("--n-resamples", "200", "--seed", "3"),
)


@pytest.mark.parametrize("name", ["plain", "repeats", "consensus", "length"])
def test_remembered_figures_print_byte_for_byte_what_scoring_prints(
    store: Path, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scorings: list[str] = []
    score = RunView.score
    monkeypatch.setattr(RunView, "score", lambda view, *a: scorings.append(view.name) or score(view, *a))
    printed = {}
    for options in OPTIONS:
        # scored: nothing remembered yet, or figures of other options (the last ones shown)
        out = tmp_path / "scored.json"
        stdout, stderr = results(store, name, *options, "--metrics-out", str(out))
        assert scorings == [name]
        scored = (stdout.replace(str(out), "FILE"), stderr, out.read_bytes())
        # remembered: printed again without scoring, byte for byte, the metrics file too
        out = tmp_path / "remembered.json"
        stdout, stderr = results(store, name, *options, "--metrics-out", str(out))
        assert (stdout.replace(str(out), "FILE"), stderr, out.read_bytes()) == scored
        plain_stdout, plain_stderr = results(store, name, *options)
        assert plain_stdout == scored[0].replace("metrics written to FILE\n", "") and plain_stderr == stderr
        assert scorings == [name]
        scorings.clear()
        printed[options] = scored
    shown = printed[()][0]
    expected = {
        "plain": "PARTIAL: 23 of 24 conversations answered",
        "repeats": "each bootstrap draw takes a conversation with all its answers",
        "consensus": "error_rate",
        "length": "overall_score_length_adjusted",
    }
    assert expected[name] in " ".join(shown.split())  # (the console wraps at 80 columns)
    assert "[0." in shown and "[0." not in printed[("--n-resamples", "0")][0]  # no resamples: no CI
    assert printed[("--seed", "7")][0] != shown  # other draws: other CIs
    if name == "plain":
        # c001's ungraded criterion, and every criterion of c005 (its answer failed)
        assert "criteria in 2 of 24 samples (left out of every score)" in shown
        assert "criteria ungraded in 2 conversations" in printed[()][1]


def test_numpy_numbers_among_the_figures_are_written_as_the_numbers_they_print() -> None:
    import numpy as np

    from healthbench.results.summary import Summary, SummaryRow

    row = SummaryRow(
        "overall", "overall_score", np.float64(0.25), np.float64(0.1), np.float64(0.4), np.int64(3)
    )
    summary = Summary((row,), 0.95, None, np.int64(3), np.int64(0), np.int64(0))  # type: ignore[arg-type]
    figures = RunFigures(summary, {"overall_score": np.float64(0.25), "n_samples": np.int64(3)}, (0, 3))
    again = RunFigures.loads(figures.dumps())
    assert again.metrics == {"overall_score": 0.25, "n_samples": 3} and again.summary == summary


def test_a_new_grade_or_sample_makes_results_score_again(store: Path) -> None:
    first, _ = results(store, "repeats")
    s = Store(store)
    run = s.require_run("repeats")
    view = RunView.of(s, run)
    key = figures_key(view)
    assert s.run_result(run.id, FIGURES, key) is not None  # remembered by the first `results`
    # a verdict changed (a resume or correction writing one grade again): another revision
    grade = s.load_grades(run.id, item_ids=["c000"], repeat=0)[("c000", 0, 0)]
    flipped = GradeStatus.NOT_MET if grade.status == GradeStatus.MET else GradeStatus.MET
    s.put(run.id, grades=[GradeRow("c000", 0, None, None, False, None, 0, flipped, "changed", 1)])
    assert s.revision(run.id) == run.revision + 1
    assert figures_key(view) != key and s.run_result(run.id, FIGURES, figures_key(view)) is None
    s.close()
    second, _ = results(store, "repeats")
    assert second != first  # scored again: the new verdict counts
    fresh = Store(store)
    view = RunView.of(fresh, fresh.require_run("repeats"))
    assert run_figures(view) == RunFigures.of(view.score(), view.unanswered())  # remembered again
    # a new answer (a resume sampling a conversation that had failed): another revision again
    before = fresh.revision(view.record.id)
    fresh.put(view.record.id, samples=[SampleRow("c001", 0, None, None, False, None, "new answer", None)])
    assert fresh.revision(view.record.id) == before + 1
    fresh.close()


def test_a_write_of_calls_only_or_of_another_run_leaves_the_revision(store: Path) -> None:
    s = Store(store)
    plain, other = s.require_run("plain"), s.require_run("length")
    s.put(other.id, grades=[GradeRow("c000", 0, None, None, False, None, 0, GradeStatus.MET, None, 1)])
    s.put(plain.id)  # nothing written
    assert s.revision(plain.id) == plain.revision
    assert s.revision(other.id) == other.revision + 1
    s.close()


def test_a_regrade_made_by_copying_its_parent_in_sql(store_target: str) -> None:
    s = Store(store_target)
    try:
        store_run(s, "source", graded_samples(3))
        source = s.require_run("source")
        s.put(source.id, samples=[SampleRow("failed", 0, None, None, False, "HTTP 500", None, [])])
        target = s.create_run("target", "eval", source.config, (), parent_run="source", copy_of=source.id)
        assert target.revision == 1  # its copied answers count as a write of its samples
        assert s.load_items(target.id) == s.load_items(source.id)
        answered = {k: r for k, r in s.load_samples(source.id).items() if r.error is None}
        assert len(answered) == 3 and s.load_samples(target.id) == answered  # the failed one is asked again
        assert s.load_grades(target.id) == {}
    finally:
        s.close()


def test_remembered_figures_round_trip_on_both_back_ends(store_target: str) -> None:
    s = Store(store_target)
    try:
        store_run(s, "r", graded_samples(10))
        view = RunView.open(s, "r")
        figures = run_figures(view, n_resamples=0)  # NaN CIs: kept through the store
        key = figures_key(view, n_resamples=0)
        body = s.run_result(view.record.id, FIGURES, key)
        assert body is not None and RunFigures.loads(body).dumps() == figures.dumps()
        assert s.run_result(view.record.id, FIGURES, "another key") is None
        assert run_figures(view, n_resamples=0).dumps() == figures.dumps()
        assert (
            figures.metrics == RunFigures.of(view.score(view.scoring_options(n_resamples=0)), (0, 10)).metrics
        )
    finally:
        s.close()


def test_a_store_before_migration_0008_is_migrated_and_scored(store_target: str) -> None:
    s = Store(store_target)
    store_run(s, "old", graded_samples(4))
    with s.engine.begin() as conn:  # what a store written before 0008 holds
        conn.execute(text("DROP TABLE run_results"))
        conn.execute(text("ALTER TABLE runs DROP COLUMN revision"))
        conn.execute(text("DELETE FROM schema_migrations WHERE name = '0008_run_results'"))
    s.close()
    s = Store(store_target)
    try:
        run = s.require_run("old")
        assert run.revision == 0
        view = RunView.of(s, run)
        assert run_figures(view).metrics["n_samples"] == 4
        s.put(run.id, grades=[GradeRow("c000", 0, None, None, False, None, 0, GradeStatus.MET, None, 1)])
        assert s.revision(run.id) == 1
    finally:
        s.close()


def test_a_run_remembers_the_figures_it_prints(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "runs.db"
    args = judged_run_args(server, db, "--model", "cand", "--base-url", server)
    ran = cli.invoke(app, [*args, "--name", "r", "--limit", "3", "--n-repeats", "2"])
    assert ran.exit_code == 0, ran.output
    monkeypatch.setattr(RunView, "score", lambda *_, **__: pytest.fail("scored"))
    shown, _ = results(db, "r")
    assert "run r · judge judge" in shown and shown in ran.stdout  # the summary the run printed


def test_a_store_that_cannot_be_written_still_shows_the_figures(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any) -> None:
        raise StoreError("cannot use the store: attempt to write a readonly database")

    monkeypatch.setattr(Store, "set_run_result", refuse)
    scorings: list[str] = []
    score = RunView.score
    monkeypatch.setattr(RunView, "score", lambda view, *a: scorings.append(view.name) or score(view, *a))
    first, _ = results(store, "plain")
    second, _ = results(store, "plain")
    assert first == second and "overall_score" in first
    assert scorings == ["plain", "plain"]  # scored again: nothing was remembered
