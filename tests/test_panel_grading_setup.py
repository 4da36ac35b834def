"""A panel's grading setup (docs/analysis.md, docs/panels.md): `grading_setup` of a panel's run holds its
members in panel order and the rule in force, so `analyze` and `compare` warn when two runs' panels
differ in a member, in the members' order, in a member's endpoint or settings, or in the rule, and name
what differs and who graded each run; a single judge's setup, and its JSON, are what they were before
panels. The runs are written straight into a store (no model call; no answer: every criterion
ungraded, which the setup does not look at)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from helpers import build_conversation

from healthbench.analysis.analyze import setting_warnings
from healthbench.analysis.compare import setup_warnings
from healthbench.analysis.inputs import grading_setup_warning, load_inputs, stored_run
from healthbench.config import build_config
from healthbench.results.correction import grading_setup
from healthbench.results.views import RunView
from healthbench.runner.run import stored_record
from healthbench.store import Store

CONVERSATIONS = [build_conversation([(5, ["axis:accuracy"]), (-2, ["axis:completeness"])], prompt_id="c0")]
OPENAI = "https://api.openai.com/v1"
NO_SETTINGS = {
    "temperature": None,
    "max_tokens": None,
    "system_message": None,
    "reasoning_effort": None,
    "extra_body": {},
}


def _judge(spec: str, **settings: Any) -> dict[str, Any]:
    """A member's identity as the store keeps it (spec, endpoint, settings)."""
    return {"spec": spec, "url": OPENAI, "settings": {**NO_SETTINGS, **settings}}


def _write(store: Store, name: str, judges: Sequence[str | dict[str, Any]], rule: str = "majority") -> None:
    members = [{"spec": j} if isinstance(j, str) else j for j in judges]
    graded_by: dict[str, Any] = {"judges": members} if len(members) > 1 else {"judge": members[0]}
    config = build_config({"dataset": "demo", **graded_by, "scoring": {"panel": rule, "n_resamples": 20}})
    record = stored_record(config, kind="eval", dataset={"variant": "demo"}, template_sha="abc")
    store.create_run(name, "eval", record, [(c.prompt_id, c.model_dump(mode="json")) for c in CONVERSATIONS])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    s = Store(tmp_path_factory.mktemp("setup") / "s.db")
    _write(s, "abc", ["openai/a", "openai/b", "openai/c"])
    _write(s, "abc-again", ["openai/a", "openai/b", "openai/c"])
    _write(s, "abd", ["openai/a", "openai/b", "openai/d"])
    _write(s, "bac", ["openai/b", "openai/a", "openai/c"])
    _write(s, "abc-unanimous", ["openai/a", "openai/b", "openai/c"], rule="unanimous")
    _write(s, "abc-hot-b", ["openai/a", {"spec": "openai/b", "settings": {"temperature": 0.7}}, "openai/c"])
    _write(s, "a", ["openai/a"])
    _write(s, "a-again", ["openai/a"])
    _write(s, "a-unanimous", ["openai/a"], rule="unanimous")  # (a rule changes nothing for one judge)
    return s


def _warnings(store: Store, first: str, second: str) -> tuple[list[str], list[str]]:
    """What `analyze` and `compare` say about the grading setups of two stored runs."""
    runs = load_inputs([first, second], store=store)
    setup = "the runs used different judge setups"
    return (
        [w for w in setting_warnings(runs) if w.startswith(setup)],
        [w for w in setup_warnings(*runs) if w.startswith(setup)],
    )


def test_a_panels_setup_is_its_members_in_order_and_its_rule(store: Store) -> None:
    setup = grading_setup(store.require_run("abc"))
    assert setup == {
        "judge": _judge("openai/a"),
        "judge_structured_output": None,
        "grader prompt": "abc",
        "profile": None,
        "judges": [_judge("openai/a"), _judge("openai/b"), _judge("openai/c")],
        "panel_rule": "majority",
    }
    # the rule in force: the one asked for (`results --panel`, `RunView.with_panel`), else the stored one
    assert grading_setup(store.require_run("abc"), "any")["panel_rule"] == "any"
    assert grading_setup(store.require_run("abc-unanimous"))["panel_rule"] == "unanimous"
    view = RunView.open(store, "abc").with_panel("any")
    loaded = stored_run(view, view.graded_samples())
    assert json.loads(loaded.grading_setup or "") == {**setup, "panel_rule": "any"}


def test_the_same_panel_does_not_warn(store: Store) -> None:
    assert _warnings(store, "abc", "abc-again") == ([], [])


@pytest.mark.parametrize(
    ("other", "differs", "graded_by"),
    [
        ("abd", "panel members", "judges openai/a, openai/b, openai/d by majority"),
        ("bac", "panel order", "judges openai/b, openai/a, openai/c by majority"),
        ("abc-unanimous", "panel rule", "judges openai/a, openai/b, openai/c by unanimous"),
        ("abc-hot-b", "openai/b's settings", "judges openai/a, openai/b, openai/c by majority"),
        ("a", "panel members", "judge openai/a"),
    ],
)
def test_panels_that_differ_warn_naming_what_differs_and_who_graded(
    store: Store, other: str, differs: str, graded_by: str
) -> None:
    ours = "judges openai/a, openai/b, openai/c by majority"
    analyze, compare = _warnings(store, "abc", other)
    assert analyze == [
        f"the runs used different judge setups ({differs} differ: local/smollm2/abc vs "
        f"local/smollm2/{other}, graded by {ours} vs {graded_by}); their verdicts are not comparable"
    ]
    assert compare == [
        f"the runs used different judge setups ({differs} differ: A vs B, graded by {ours} vs {graded_by}); "
        "their verdicts are not comparable"
    ]


def test_two_panels_differing_in_the_chair_and_the_rule_name_both_once() -> None:
    first = {"judges": [_judge("a"), _judge("b")], "judge": _judge("a"), "panel_rule": "majority"}
    second = {"judges": [_judge("c"), _judge("b")], "judge": _judge("c"), "panel_rule": "any"}
    warning = grading_setup_warning([json.dumps(first), json.dumps(second)], ["A", "B"])
    assert warning == (
        "the runs used different judge setups (panel members, panel rule differ: A vs B, graded by "
        "judges a, b by majority vs judges c, b by any); their verdicts are not comparable"
    )


def test_a_single_judges_setup_and_its_json_are_unchanged(store: Store) -> None:
    run = store.require_run("a")
    expected = {
        "judge": _judge("openai/a"),
        "judge_structured_output": None,
        "grader prompt": "abc",
        "profile": None,
    }
    assert grading_setup(run) == grading_setup(run, "unanimous") == expected
    (loaded,) = load_inputs(["a"], store=store)
    assert loaded.grading_setup == (
        '{"grader prompt": "abc", "judge": {"settings": {"extra_body": {}, "max_tokens": null, '
        '"reasoning_effort": null, "system_message": null, "temperature": null}, "spec": "openai/a", '
        '"url": "https://api.openai.com/v1"}, "judge_structured_output": null, "profile": null}'
    )
    # two single-judge runs: no warning, whatever rule they stored; another judge: the words of before
    assert _warnings(store, "a", "a-again") == ([], [])
    assert _warnings(store, "a", "a-unanimous") == ([], [])
    other = {**expected, "judge": _judge("openai/b")}
    assert grading_setup_warning([json.dumps(expected), json.dumps(other)], ["A", "B"]) == (
        "the runs used different judge setups (judge model differ: A vs B); their verdicts are not comparable"
    )
