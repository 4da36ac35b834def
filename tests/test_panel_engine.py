"""A panel of judges through the one engine (docs/runs.md): every member grades every criterion, each
member's verdicts stored under its label; resume, re-run, regrade --add-judge/--drop-judge and --batch
per member, against the fake server (no faults). The same panel on ``--executor ray``, against the
local engine: tests/test_ray_executor.py (where the session's one local Ray lives)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import and_, delete
from support.fake_runs import FAKE_JUDGE, fake_run_config

from healthbench.cli.config_flags import config_layer
from healthbench.config import build_config
from healthbench.errors import ConfigError
from healthbench.runner.run import regrade, resume_run, run_eval
from healthbench.store import Store
from healthbench.store.db import grades
from healthbench.testing.fake_server import fetch_stats, reset_stats

PANEL = [FAKE_JUDGE, "judge-two", "judge-three"]


@pytest.fixture()
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "panel.db")


def panel_config(url: str, members: list[str], **extra: object):
    return fake_run_config(
        url, judge=None, judges=[{"spec": m, "base_url": url} for m in members], limit=4, **extra
    )


def criteria_count(store: Store, name: str) -> int:
    run = store.require_run(name)
    return sum(len(record["rubrics"]) for _, record in store.load_items(run.id))


def test_three_judges_make_three_calls_and_three_rows_per_criterion(server: str, store: Store) -> None:
    reset_stats(server)
    outcome = run_eval(panel_config(server, PANEL), store=store, name="p")
    n = criteria_count(store, "p")
    assert fetch_stats(server)["judge"] == 3 * n  # exactly one call per criterion and member
    stored = store.load_grades(outcome.run.id)
    assert len(stored) == 3 * n
    by_member = {m: {k[:3]: r.status for k, r in stored.items() if k[3] == m} for m in PANEL}
    assert all(len(rows) == n for rows in by_member.values())
    # the fake judge's verdict depends on the prompt only: every member agrees, criterion by criterion
    assert by_member["judge-two"] == by_member[FAKE_JUDGE] == by_member["judge-three"]
    assert set(outcome.counters.members) == set(PANEL)
    assert all(t.made == n for t in outcome.counters.members.values())
    assert outcome.counters.criteria_total == outcome.counters.criteria_done == 3 * n

    # a finished run re-run makes no call
    reset_stats(server)
    again = run_eval(panel_config(server, PANEL), store=store, name="p")
    assert fetch_stats(server)["requests"] == 0 and again.run.status == "finished"


def test_a_resumed_panel_run_asks_only_what_one_member_lost(server: str, store: Store) -> None:
    run = run_eval(panel_config(server, PANEL), store=store, name="r").run
    lost = [k for k in store.load_grades(run.id) if k[3] == "judge-two"][:5]
    with store.engine.begin() as conn:
        for item, repeat, criterion, judge in lost:
            conn.execute(
                delete(grades).where(
                    and_(
                        grades.c.run_id == run.id,
                        grades.c.item_id == item,
                        grades.c.repeat == repeat,
                        grades.c.criterion == criterion,
                        grades.c.judge == judge,
                    )
                )
            )
    store.set_status(run.id, "incomplete")  # type: ignore[arg-type]
    reset_stats(server)
    # the call cache holds the lost answers: a resume answers them from it, asking no model
    outcome = resume_run("r", store=store)
    assert fetch_stats(server)["requests"] == 0
    assert outcome.counters.members["judge-two"].cached_calls == 5
    assert set(outcome.counters.members) == {"judge-two"}
    assert len(store.load_grades(run.id)) == 3 * criteria_count(store, "r")


def test_regrade_add_judge_asks_only_the_new_member_and_drop_judge_asks_nobody(
    server: str, store: Store
) -> None:
    parent = run_eval(panel_config(server, PANEL[:2]), store=store, name="two").run
    n = criteria_count(store, "two")
    before = store.load_grades(parent.id)
    reset_stats(server)
    added = regrade(
        "two", None, store=store, name="three", add_judges=[{"spec": "judge-three", "base_url": server}]
    )
    assert fetch_stats(server)["judge"] == n  # one call per criterion: the new member's
    assert [m.label for m in _panel(store, "three")] == PANEL
    rows = store.load_grades(added.run.id)
    kept = {k: r for k, r in rows.items() if k[3] != "judge-three"}
    assert {k: (r.status, r.explanation, r.usage, r.attempts) for k, r in kept.items()} == {
        k: (r.status, r.explanation, r.usage, r.attempts) for k, r in before.items()
    }
    assert sum(1 for k in rows if k[3] == "judge-three") == n

    reset_stats(server)
    dropped = regrade("three", None, store=store, name="dropped", drop_judges=["judge-two"])
    assert fetch_stats(server)["requests"] == 0
    assert [m.label for m in _panel(store, "dropped")] == [FAKE_JUDGE, "judge-three"]
    assert {k[3] for k in store.load_grades(dropped.run.id)} == {FAKE_JUDGE, "judge-three"}
    assert dropped.run.status == "finished"


def _panel(store: Store, name: str):
    from healthbench.config import RunConfig

    return RunConfig.model_validate(store.require_run(name).config["run"]).panel


def test_batch_judge_with_two_judges_maps_every_answer_to_its_member(
    server: str, store: Store, tmp_path: Path
) -> None:
    reset_stats(server)
    config = panel_config(
        server, PANEL[:2], batch="judge", batch_linger=0.05, batch_max_wait=0.5, batch_poll_interval=0.05
    )
    outcome = run_eval(config, store=store, name="b")
    n = criteria_count(store, "b")
    stats = fetch_stats(server)
    assert stats["judge"] == 0 and stats["batch_requests"] == 2 * n  # every judge call batched
    stored = store.load_grades(outcome.run.id)
    assert sorted({k[3] for k in stored}) == sorted(PANEL[:2]) and len(stored) == 2 * n
    # the same run online (another store, another cache): the same verdict for every (criterion, member)
    other = Store(tmp_path / "online.db")
    online = run_eval(panel_config(server, PANEL[:2]), store=other, name="o")
    want = {k: r.status for k, r in other.load_grades(online.run.id).items()}
    assert {k: r.status for k, r in stored.items()} == want


def test_per_judge_flags_apply_to_every_member_or_to_each_in_order() -> None:
    once = config_layer({"judge": ["openai/a", "openai/b"], "judge_base_url": ["http://x/v1"]})
    assert [m["base_url"] for m in once["judges"]] == ["http://x/v1", "http://x/v1"]
    each = config_layer(
        {
            "judge": ["openai/a", "openai/b"],
            "judge_base_url": ["http://x/v1", "http://y/v1"],
            "judge_api_key_env": ["KEY_A", "KEY_B"],
            "judge_temperature": 0.3,
        }
    )
    config = build_config(each)
    assert [(m.label, m.base_url, m.api_key_env) for m in config.panel] == [
        ("openai/a", "http://x/v1", "KEY_A"),
        ("openai/b", "http://y/v1", "KEY_B"),
    ]
    assert all(m.settings.temperature == 0.3 for m in config.panel)
    assert config.judge.label == "openai/a"  # the chair
    # one --judge: `judge`, as before
    assert config_layer({"judge": ["openai/a"], "judge_base_url": ["http://x/v1"]}) == {
        "judge": {"spec": "openai/a", "base_url": "http://x/v1"}
    }
    with pytest.raises(ConfigError, match="--judge-base-url given 2 times for 3 judges"):
        config_layer({"judge": ["a", "b", "c"], "judge_base_url": ["u", "v"]})
    with pytest.raises(ConfigError, match="--judge-api-key-env given 2 times for one --judge"):
        config_layer({"judge": ["a"], "judge_api_key_env": ["A", "B"]})


def test_a_job_body_with_judges_makes_the_run_config_of_the_cli(server: str, tmp_path: Path) -> None:
    from service_helpers import completed_job

    from healthbench.client import Client
    from healthbench.service.operations import job_config

    members = [{"spec": m, "base_url": server, "settings": {"temperature": 0.25}} for m in PANEL]
    body = {"model": {"spec": "cand", "base_url": server}, "judges": members, "limit": 2}
    flags = {
        "model": "cand",
        "base_url": server,
        "judge": PANEL,
        "judge_base_url": [server],
        "judge_temperature": 0.25,
        "limit": 2,
    }
    cli = build_config(config_layer(flags))
    assert job_config(body, None, tmp_path) == cli
    with Client.local(tmp_path / "s.db") as client:
        jobs = client.evaluation.benchmark_jobs
        reset_stats(server)
        jobs.create(name="panel", **body)
        completed_job(client, "panel")
    stored = Store(tmp_path / "s.db")
    run = next(r for r in stored.list_runs() if r.name.endswith("panel"))
    rows = stored.load_grades(run.id)
    n = sum(len(record["rubrics"]) for _, record in stored.load_items(run.id))
    assert fetch_stats(server)["judge"] == 3 * n and {k[3] for k in rows} == set(PANEL) and len(rows) == 3 * n
    assert [u.judge for u in stored.iter_usage(run.id) if u.role == "judge"].count("judge-two") == n


def test_dry_run_estimates_each_member_and_regrade_add_judge_only_the_new_one(
    server: str, store: Store
) -> None:
    from healthbench.runner.run import dry_run, regrade_dry_run

    config = panel_config(server, PANEL[:2])
    _, rows = dry_run(store, config, None)
    single = dry_run(store, fake_run_config(server, limit=4), None)[1]
    judged = [r for r in rows if r.role == "judge"]
    assert [r.model for r in judged] == [f"openai/{FAKE_JUDGE}", "openai/judge-two"]
    # each member is estimated as the single judge would be
    one = next(r for r in single if r.role == "judge")
    assert all((r.calls, r.input_tokens) == (one.calls, one.input_tokens) for r in judged)
    run_eval(config, store=store, name="d")
    add = [{"spec": "judge-three", "base_url": server}]
    _, _, estimate = regrade_dry_run(store, "d", None, add_judges=add)
    calls = {r.model: r.calls for r in estimate if r.role == "judge"}
    assert calls == {f"openai/{m}": n for m, n in zip(PANEL, (0, 0, one.calls), strict=True)}
