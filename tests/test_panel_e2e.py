"""Issue #30's "Done when", end to end through the real CLI and the job service against the fake server:
a panel of three fake judges of known, different error rates (docs/panels.md: `<name>-errNN` flips the
truth with probability NN %, independently) grades the demo dataset twice over. Every expected number is
computed here from the members' verdicts as the store holds them: the panel rules and the HealthBench
score formula are written out below, independently of the project's scoring code."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.store import Store
from healthbench.testing.fake_server import fetch_stats, reset_stats

MEMBERS = ["judge-a-err10", "judge-b-err20", "judge-c-err30"]  # the first is the chair
FOURTH = "judge-d-err40"
N_REPEATS = 2
MET, NOT_MET, UNGRADED = "met", "not_met", "ungraded"

Criterion = tuple[str, int, int]  # (item, repeat, criterion index)
Rule = Callable[[list[str]], str]


# ---------------------------------------------------------------- independent computations


def _graded(votes: list[str]) -> list[str] | None:
    """The graded votes when a strict majority of members graded the criterion, else None (the
    panel's verdict is then ungraded: docs/panels.md, "Ungraded members")."""
    graded = [v for v in votes if v != UNGRADED]
    return graded if 2 * len(graded) > len(votes) else None


def majority(votes: list[str]) -> str:
    graded = _graded(votes)
    if graded is None:
        return UNGRADED
    met = graded.count(MET)
    if 2 * met == len(graded):
        return graded[0]  # a tie: the first member in panel order who graded it
    return MET if 2 * met > len(graded) else NOT_MET


def unanimous(votes: list[str]) -> str:
    graded = _graded(votes)
    if graded is None:
        return UNGRADED
    return MET if all(v == MET for v in graded) else NOT_MET


def any_met(votes: list[str]) -> str:
    graded = _graded(votes)
    if graded is None:
        return UNGRADED
    return MET if MET in graded else NOT_MET


@dataclass(frozen=True)
class StoredRun:
    """A run's rubrics (item -> [(points, tags)]) and each member's stored status per criterion."""

    rubrics: dict[str, list[tuple[float, list[str]]]]
    statuses: dict[Criterion, dict[str, str]]

    @classmethod
    def read(cls, store_path: Path, name: str) -> StoredRun:
        store = Store(store_path)
        try:
            run = store.require_run(name)
            rubrics = {
                item: [(float(r["points"]), list(r["tags"])) for r in record["rubrics"]]
                for item, record in store.load_items(run.id)
            }
            statuses: dict[Criterion, dict[str, str]] = {}
            for (item, repeat, criterion, judge), row in store.load_grades(run.id).items():
                statuses.setdefault((item, repeat, criterion), {})[judge] = row.status
        finally:
            store.close()
        return cls(rubrics, statuses)

    @property
    def criteria(self) -> list[Criterion]:
        return [
            (item, repeat, index)
            for item, rubric in self.rubrics.items()
            for repeat in range(N_REPEATS)
            for index in range(len(rubric))
        ]

    def votes(self, members: list[str]) -> dict[Criterion, list[str]]:
        """Each criterion's votes in panel order; a member with no stored grade counts as ungraded."""
        return {c: [self.statuses.get(c, {}).get(m, UNGRADED) for m in members] for c in self.criteria}

    def verdicts(self, members: list[str], rule: Rule) -> dict[Criterion, str]:
        return {c: rule(votes) for c, votes in self.votes(members).items()}

    def score(self, verdicts: dict[Criterion, str], tag: str | None = None) -> float:
        """HealthBench's score: per answer, the points of its met criteria over its positive points
        (only the criteria with ``tag`` when given; an answer with no positive points there is left
        out); the mean over answers, clipped to [0, 1]. An answer with an ungraded criterion is left
        out (docs/panels.md)."""
        values = []
        for item, rubric in self.rubrics.items():
            for repeat in range(N_REPEATS):
                said = [verdicts[(item, repeat, i)] for i in range(len(rubric))]
                if UNGRADED in said:
                    continue
                chosen = [
                    (p, v) for (p, tags), v in zip(rubric, said, strict=True) if tag is None or tag in tags
                ]
                possible = sum(p for p, _ in chosen if p > 0)
                if possible == 0:
                    continue
                values.append(sum(p for p, v in chosen if v == MET) / possible)
        return min(1.0, max(0.0, sum(values) / len(values)))

    def axes(self) -> set[str]:
        return {
            t for rubric in self.rubrics.values() for _, tags in rubric for t in tags if t.startswith("axis:")
        }

    def agreement(self, members: list[str]) -> float:
        complete = [v for v in self.votes(members).values() if UNGRADED not in v]
        return sum(len(set(v)) == 1 for v in complete) / len(complete)


def member(panel: list[str], label: str) -> Rule:
    """The "rule" that takes the vote of member ``label`` of ``panel``: its own verdicts."""
    at = panel.index(label)
    return lambda votes: votes[at]


def close(value: float) -> Any:
    return pytest.approx(value, rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------- the CLI


def cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


def metrics_of(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


@dataclass(frozen=True)
class PanelRun:
    url: str
    folder: Path
    store: Path
    metrics: dict[str, Any]
    stats: dict[str, Any]
    stored: StoredRun


@pytest.fixture(scope="module")
def panel_run(server: str, tmp_path_factory: pytest.TempPathFactory) -> PanelRun:
    folder = tmp_path_factory.mktemp("panel-e2e")
    store, out = folder / "s.db", folder / "m.json"
    judges = [flag for label in MEMBERS for flag in ("--judge", label)]
    reset_stats(server)
    cli(
        "run", "--model", "cand", "--base-url", server, *judges, "--judge-base-url", server,
        "--n-repeats", str(N_REPEATS), "--max-retries", "0", "--store", str(store), "--name", "p",
        "--metrics-out", str(out),
    )  # fmt: skip
    stats = fetch_stats(server)
    return PanelRun(server, folder, store, metrics_of(out), stats, StoredRun.read(store, "p"))


# ---------------------------------------------------------------- tests


def test_three_judges_of_known_error_rates_disagree_and_each_is_asked_once_per_criterion(
    panel_run: PanelRun,
) -> None:
    stored = panel_run.stored
    n = len(stored.criteria)
    assert n > 0
    assert panel_run.stats["judge"] == 3 * n  # exactly three judge calls per criterion
    assert panel_run.stats["candidate"] == N_REPEATS * len(stored.rubrics)
    # every member graded every criterion, once, under its own label
    assert all(set(s) == set(MEMBERS) for s in stored.statuses.values()) and len(stored.statuses) == n
    assert {v for s in stored.statuses.values() for v in s.values()} == {MET, NOT_MET}
    # criteria of negative points are among them (met, they take points off under every rule)
    assert any(p < 0 for rubric in stored.rubrics.values() for p, _ in rubric)
    # the members disagree: each pair on some criterion, and not all three agree everywhere
    votes = stored.votes(MEMBERS)
    for a in range(3):
        for b in range(a + 1, 3):
            assert any(v[a] != v[b] for v in votes.values()), (MEMBERS[a], MEMBERS[b])
    assert 0 < stored.agreement(MEMBERS) < 1


def test_the_panels_metrics_are_the_majority_of_the_stored_verdicts(panel_run: PanelRun) -> None:
    stored, metrics = panel_run.stored, panel_run.metrics
    panel = stored.verdicts(MEMBERS, majority)
    assert metrics["panel_rule"] == "majority"
    assert metrics["overall_score"] == close(stored.score(panel))
    assert stored.axes() and all(axis in metrics for axis in stored.axes())
    for axis in stored.axes():
        assert metrics[axis] == close(stored.score(panel, axis)), axis
    # each member's own score, from its own verdicts
    own = {label: stored.score(stored.verdicts(MEMBERS, member(MEMBERS, label))) for label in MEMBERS}
    for label in MEMBERS:
        assert metrics[f"judge:{label}:overall_score"] == close(own[label]), label
        for axis in stored.axes():
            mine = stored.score(stored.verdicts(MEMBERS, member(MEMBERS, label)), axis)
            assert metrics[f"judge:{label}:{axis}"] == close(mine), (label, axis)
    assert len(set(own.values())) == 3  # (the members' scores differ: the keys are not one number)
    assert metrics["judge_agreement"] == close(stored.agreement(MEMBERS))


def test_regrade_add_judge_asks_only_the_new_member(panel_run: PanelRun) -> None:
    out = panel_run.folder / "m4.json"
    reset_stats(panel_run.url)
    cli(
        "regrade", "p", "--add-judge", FOURTH, "--judge-base-url", panel_run.url, "--name", "p4",
        "--max-retries", "0", "--store", str(panel_run.store), "--metrics-out", str(out),
    )  # fmt: skip
    stats = fetch_stats(panel_run.url)
    n = len(panel_run.stored.criteria)
    assert stats["judge"] == n and stats["candidate"] == 0  # one call per criterion: the new member's
    four, metrics = StoredRun.read(panel_run.store, "p4"), metrics_of(out)
    assert {c: {m: s[m] for m in MEMBERS} for c, s in four.statuses.items()} == panel_run.stored.statuses
    for label in MEMBERS:  # the members' own scores are those of the run they came from
        key = f"judge:{label}:overall_score"
        assert metrics[key] == panel_run.metrics[key], label
    panel = [*MEMBERS, FOURTH]
    assert metrics[f"judge:{FOURTH}:overall_score"] == close(
        four.score(four.verdicts(panel, member(panel, FOURTH)))
    )
    # four members: ties happen, both ways for the chair (whose vote `majority` takes on a tie)
    ties = [v for v in four.votes(panel).values() if v.count(MET) == 2]
    assert {v[0] for v in ties} == {MET, NOT_MET}
    assert metrics["overall_score"] == close(four.score(four.verdicts(panel, majority)))
    assert metrics["judge_agreement"] == close(four.agreement(panel))


@pytest.mark.parametrize("rule", ["unanimous", "any"])
def test_results_panel_recombines_the_stored_verdicts_without_a_call(panel_run: PanelRun, rule: str) -> None:
    out = panel_run.folder / f"m-{rule}.json"
    reset_stats(panel_run.url)
    cli("results", "p", "--panel", rule, "--store", str(panel_run.store), "--metrics-out", str(out))
    assert fetch_stats(panel_run.url)["requests"] == 0
    stored, metrics = panel_run.stored, metrics_of(out)
    verdicts = stored.verdicts(MEMBERS, {"unanimous": unanimous, "any": any_met}[rule])
    assert metrics["panel_rule"] == rule
    assert metrics["overall_score"] == close(stored.score(verdicts))
    for axis in stored.axes():
        assert metrics[axis] == close(stored.score(verdicts, axis)), axis
    # the rule matters on this run: it moves the score away from the majority's, the way it leans
    majority_score = panel_run.metrics["overall_score"]
    if rule == "unanimous":
        assert metrics["overall_score"] < majority_score
    else:
        assert metrics["overall_score"] > majority_score
    # the members' own scores and their agreement do not depend on the rule
    for key in [f"judge:{label}:overall_score" for label in MEMBERS] + ["judge_agreement"]:
        assert metrics[key] == panel_run.metrics[key]


def test_a_service_job_with_three_judges_gives_the_cli_runs_metrics(
    panel_run: PanelRun, tmp_path: Path
) -> None:
    from service_helpers import completed_job

    from healthbench.client import Client

    url = panel_run.url
    body: dict[str, Any] = {
        "model": {"spec": "cand", "base_url": url},
        "judges": [{"spec": label, "base_url": url} for label in MEMBERS],
        "repeats": N_REPEATS,
        "max_retries": 0,
    }
    with Client.local(tmp_path / "service.db") as client:
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="panel", **body)
        completed_job(client, "panel")
        metrics = jobs.results.metrics.download(name="panel")
    keys = ["overall_score", "judge_agreement", "judge_fleiss_kappa", "panel_rule"]
    keys += [f"judge:{label}:overall_score" for label in MEMBERS]
    keys += sorted(panel_run.stored.axes())
    assert {k: metrics[k] for k in keys} == {k: panel_run.metrics[k] for k in keys}
    assert metrics == panel_run.metrics  # and every other figure of the document
