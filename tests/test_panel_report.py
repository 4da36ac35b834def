"""The report's "Judges" section of a panel of judges' run (docs/report.md): each member's own score,
agreement, Fleiss' and pairwise Cohen's kappa, where members disagree, and the split criteria, checked
against independent computations; a single judge's report has no such section. A Chromium check opens
a split criterion's conversation from the section (skipped without Chromium)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_panel_results import (
    CONVERSATIONS,
    FAILED,
    MEMBERS,
    N_REPEATS,
    _agreement,
    _majority,
    _member_verdicts,
    _samples,
    _write_run,
)

from healthbench.analysis.inputs import load_stored
from healthbench.analysis.report import build_report
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.scoring.verdict import Verdict
from healthbench.store import Store

OPTIONS = ScoringOptions(n_resamples=50, seed=3)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    s = Store(tmp_path_factory.mktemp("panel-report") / "runs.db")
    _write_run(s, "panel", MEMBERS)
    _write_run(s, "single", MEMBERS[:1])
    yield s
    s.close()


def _cohen(a: list[Verdict], b: list[Verdict]) -> float:
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if Verdict.UNGRADED not in (x, y)]
    observed = sum(x is y for x, y in pairs) / len(pairs)
    pa = sum(x is Verdict.MET for x, _ in pairs) / len(pairs)
    pb = sum(y is Verdict.MET for _, y in pairs) / len(pairs)
    expected = pa * pb + (1 - pa) * (1 - pb)
    return (observed - expected) / (1 - expected)


def test_the_judges_section_is_each_members_score_and_their_agreement(store: Store) -> None:
    report = build_report([load_stored(store, store.require_run("panel"))], options=OPTIONS)
    judges = report.summary["runs"][0]["judges"]
    assert judges["rule"] == "majority" and report.summary["panels"]
    for number, member in enumerate(judges["members"]):
        own = score_run(_samples(number), OPTIONS)
        assert member["label"] == MEMBERS[number]
        assert member["overall"]["mean"] == own.stats["overall_score"].mean
        assert member["axes"]["accuracy"] == own.stats["axis:accuracy"].mean
    share, complete = _agreement()
    assert judges["agreement"] == share and judges["graded_by_all"] == complete
    columns: list[list[Verdict]] = [[] for _ in MEMBERS]
    splits = 0
    for repeat in range(N_REPEATS):
        for conversation in CONVERSATIONS:
            for index in range(len(conversation.rubrics)):
                votes = _member_verdicts(conversation.prompt_id, repeat, index)
                splits += Verdict.MET in votes and Verdict.NOT_MET in votes
                for column, vote in zip(columns, votes, strict=True):
                    column.append(vote)
    assert judges["pairwise"][0][1] == pytest.approx(_cohen(columns[0], columns[1]))
    assert judges["pairwise"][2][1] == pytest.approx(_cohen(columns[1], columns[2]))
    assert judges["pairwise"][0][0] is None
    assert judges["n_splits"] == splits == len(judges["splits"])
    first = judges["splits"][0]
    votes = _member_verdicts(first["id"], first["r"], 0 if first["criterion"] == "criterion 0" else 1)
    assert first["votes"] == "".join(
        {Verdict.MET: "m", Verdict.NOT_MET: "n", Verdict.UNGRADED: "u"}[v] for v in votes
    )
    assert first["panel"] == {Verdict.MET: "m", Verdict.NOT_MET: "n"}[_majority(votes)]
    assert (first["id"], first["r"]) != FAILED
    # most disagreement first, each share within [0, 1]
    shares = [row["disagreement"] for row in judges["by_axis"]]
    assert shares == sorted(shares, reverse=True) and all(0 <= s <= 1 for s in shares)
    html = report.html()
    assert 'id="judges"' in html and "judge_agreement" in html and "Cohen" in html


def test_a_single_judges_report_has_no_judges_section(store: Store) -> None:
    report = build_report([load_stored(store, store.require_run("single"))], options=OPTIONS)
    assert report.summary["runs"][0]["judges"] is None and not report.summary["panels"]
    assert 'id="judges"' not in report.html()


def test_a_split_criterion_opens_its_conversation_in_chromium(store: Store, tmp_path: Path) -> None:
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    from support.browser import CHROMIUM, NO_CHROMIUM, chromium_context

    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    path = build_report([load_stored(store, store.require_run("panel"))], options=OPTIONS).write(
        tmp_path / "report.html"
    )
    with chromium_context(tmp_path / "profile", viewport={"width": 1280, "height": 900}) as context:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready]", state="attached", timeout=30_000)
        assert page.locator("#judges .judges-scores tbody tr").count() == len(MEMBERS) + 1
        page.locator("#judges").screenshot(path=str(tmp_path / "judges.png"))
        link = page.locator("#judges .splits a").first
        target = link.inner_text()
        link.click()
        page.wait_for_selector(f"#conv-detail h3:has-text('{target}')", timeout=10_000)
        assert "[openai/judge-a:" in page.locator("#conv-detail").inner_text()
        assert errors == []
