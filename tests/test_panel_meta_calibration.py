"""`results.calibration.load_calibration`: the calibration of a panel read from stored meta-eval runs (one
per member, or one run of the whole panel) equals `calibration_from_meta` on the same rows and verdicts;
a missing run, a run that is not a meta-eval and a judge measured twice are refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from panel_meta_runs import drawn_verdicts, meta_rows, stored_panel_meta, write_rows

from healthbench.data.schema import MetaEvalRecord
from healthbench.errors import RunError
from healthbench.results.calibration import load_calibration
from healthbench.results.meta_results import stored_verdicts
from healthbench.scoring.panel import calibration_from_meta
from healthbench.store.runs import RunStatus, Store

ROWS = meta_rows()
PANEL = {
    "judge-a": drawn_verdicts(ROWS, 0.1, 1),
    "judge-b": drawn_verdicts(ROWS, 0.25, 2),
    "judge-c": drawn_verdicts(ROWS, 0.4, 3),
}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    path = write_rows(tmp_path / "meta.jsonl", ROWS)
    s = Store(tmp_path / "s.db")
    stored_panel_meta(s, path, PANEL, name="panel")
    for label, votes in PANEL.items():
        stored_panel_meta(s, path, {label: votes}, name=f"solo-{label}")
    return s


def test_a_panel_run_gives_every_members_rates(store: Store) -> None:
    rows, verdicts = stored_verdicts(store, store.require_run("panel"))
    assert list(verdicts) == list(PANEL) and verdicts == PANEL  # panel order, row order
    expected = calibration_from_meta([MetaEvalRecord.model_validate(r) for r in ROWS], PANEL, min_rows=30)
    assert load_calibration(store, ["panel"]) == expected
    assert [r.completion_id for r in rows] == [r["completion_id"] for r in ROWS]


def test_one_run_per_member_merges_into_the_same_calibration(store: Store) -> None:
    merged = load_calibration(store, [f"solo-{label}" for label in PANEL])
    assert merged == load_calibration(store, ["panel"])
    assert list(merged.rates) == list(PANEL)


def test_errors_are_one_line(store: Store) -> None:
    with pytest.raises(RunError, match=r"^no run named 'nope' in .*`healthbench runs` lists them$"):
        load_calibration(store, ["panel", "nope"])
    with pytest.raises(RunError, match=r"^judge 'judge-b' is measured by two meta-eval runs \('panel' and"):
        load_calibration(store, ["panel", "solo-judge-b"])
    with pytest.raises(RunError, match=r"^no meta-eval run to calibrate with"):
        load_calibration(store, [])


def test_an_eval_run_is_not_a_calibration(store: Store, tmp_path: Path) -> None:
    from healthbench.config import build_config
    from healthbench.runner.run import prepare_eval

    url = "http://127.0.0.1:9/v1"
    models = {"model": {"spec": "cand", "base_url": url}, "judge": {"spec": "j", "base_url": url}}
    config = build_config({"dataset": "demo", **models})
    run = prepare_eval(store, config, "an-eval")
    store.set_status(run.id, RunStatus.FINISHED)
    with pytest.raises(RunError, match=r"^--calibrate-with needs meta-eval runs; 'an-eval' is an eval run$"):
        load_calibration(store, ["an-eval"])


def test_a_run_without_a_physicians_majority_cannot_calibrate(tmp_path: Path) -> None:
    tied = [{**r, "binary_labels": [True, False], "anonymized_physician_ids": ["p1", "p2"]} for r in ROWS[:6]]
    s = Store(tmp_path / "t.db")
    stored_panel_meta(s, write_rows(tmp_path / "tied.jsonl", tied), {"judge-a": PANEL["judge-a"][:6]})
    with pytest.raises(RunError, match=r"^meta-eval run 'meta' cannot calibrate a panel: no meta-eval row"):
        load_calibration(s, ["meta"])
