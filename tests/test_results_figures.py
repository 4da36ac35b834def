"""`healthbench results NAME` shows the run as the store holds it now: the summary of its scores, and
a `--metrics-out` file equal to the metrics of the run scored with the options given."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import build_conversation, build_sample, judged_run_args
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import RunConfig
from healthbench.grading.template import load_template
from healthbench.results.metrics_out import metrics_document, usage_metrics
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
        grades=[g for s in samples for g in _grades(s, config.judge.label)],
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


def scored_metrics(store: Path, name: str, seed: int | None, n_resamples: int | None) -> dict[str, Any]:
    """The metrics document of run ``name`` scored through the library (`RunView.score`)."""
    s = Store(store)
    try:
        view = RunView.open(s, name)
        score = view.score(view.scoring_options(seed=seed, n_resamples=n_resamples))
        usage = view.usage_totals()
        return metrics_document(
            score.metrics(), usage_metrics(usage.candidate, usage.judge), provenance=view.provenance()
        )
    finally:
        s.close()


@pytest.mark.parametrize("name", ["plain", "repeats", "consensus", "length"])
def test_results_prints_the_summary_and_writes_the_runs_metrics(
    store: Path, name: str, tmp_path: Path
) -> None:
    printed = {}
    for options in OPTIONS:
        out = tmp_path / "metrics.json"
        stdout, stderr = results(store, name, *options, "--metrics-out", str(out))
        seed = int(options[options.index("--seed") + 1]) if "--seed" in options else None
        n = int(options[options.index("--n-resamples") + 1]) if "--n-resamples" in options else None
        assert json.loads(out.read_text()) == json.loads(json.dumps(scored_metrics(store, name, seed, n)))
        again, again_err = results(store, name, *options)  # shown again: the same
        assert again == stdout.replace(f"metrics written to {out}\n", "") and again_err == stderr
        printed[options] = (stdout, stderr)
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


def test_a_new_grade_or_sample_is_in_what_results_shows_next(store: Path) -> None:
    first, _ = results(store, "repeats")
    s = Store(store)
    run = s.require_run("repeats")
    # a verdict changed (a resume or correction writing one grade again)
    grade = s.load_grades(run.id, item_ids=["c000"], repeat=0)[("c000", 0, 0, "openai/gpt-4.1")]
    flipped = GradeStatus.NOT_MET if grade.status == GradeStatus.MET else GradeStatus.MET
    s.put(
        run.id,
        grades=[GradeRow("c000", 0, None, None, False, None, 0, flipped, "changed", 1, judge=grade.judge)],
    )
    s.close()
    second, _ = results(store, "repeats")
    assert second != first  # the new verdict counts
    partial, _ = results(store, "plain")
    s = Store(store)  # the failed answer of c005 answered (a resume)
    s.put(s.require_run("plain").id, samples=[SampleRow("c005", 0, None, None, False, None, "new", None)])
    s.close()
    answered, _ = results(store, "plain")
    assert "PARTIAL" in partial and "PARTIAL" not in answered


def test_a_regrade_made_by_copying_its_parent_in_sql(store_target: str) -> None:
    s = Store(store_target)
    try:
        store_run(s, "source", graded_samples(3))
        source = s.require_run("source")
        s.put(source.id, samples=[SampleRow("failed", 0, None, None, False, "HTTP 500", None, [])])
        target = s.create_run("target", "eval", source.config, (), parent_run="source", copy_of=source.id)
        assert s.load_items(target.id) == s.load_items(source.id)
        answered = {k: r for k, r in s.load_samples(source.id).items() if r.error is None}
        assert len(answered) == 3 and s.load_samples(target.id) == answered  # the failed one is asked again
        assert s.load_grades(target.id) == {}
    finally:
        s.close()


def test_a_run_prints_the_summary_results_prints(server: str, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    args = judged_run_args(server, db, "--model", "cand", "--base-url", server)
    ran = cli.invoke(app, [*args, "--name", "r", "--limit", "3", "--n-repeats", "2"])
    assert ran.exit_code == 0, ran.output
    shown, _ = results(db, "r")
    assert "run r · judge judge" in shown and shown in ran.stdout
