"""API tokens of the job service: listed by the start of their hash, revoked by token or id, and a
revoked token is refused by a service (at once by a new one, within the cache time by a running one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.service_process import service_process
from typer.testing import CliRunner

from healthbench.cli import app
from healthbench.client import Client, ServiceError
from healthbench.errors import ConfigError
from healthbench.service.app import PREFIX, create_app
from healthbench.service.auth import (
    BOOTSTRAP_TOKEN_ENV,
    TokenCache,
    bootstrap_token,
    create_token,
    first_token,
    revoke_token,
    token_hash,
    token_id,
)
from healthbench.service.operations import JobService
from healthbench.store.jobs import JobStore
from healthbench.store.runs import Store

JOBS = PREFIX.format(workspace="default")


@pytest.fixture
def jobs(tmp_path: Path):
    store = Store(tmp_path / "s.db")
    yield JobStore(store)
    store.close()


def test_listing_shows_ids_workspaces_and_labels_never_tokens(jobs: JobStore) -> None:
    a = create_token(jobs, ["team-a"], "ci")
    b = create_token(jobs, ["*"])
    listed = {token_id(t.token_sha256): t for t in jobs.list_tokens()}
    assert set(listed) == {token_hash(a)[:12], token_hash(b)[:12]}
    assert listed[token_hash(a)[:12]].workspaces == ["team-a"]
    assert listed[token_hash(a)[:12]].label == "ci"
    assert listed[token_hash(b)[:12]].label is None


def test_revoke_by_token_or_by_id(jobs: JobStore) -> None:
    a = create_token(jobs, ["team-a"])
    b = create_token(jobs, ["team-b"])
    assert revoke_token(jobs, a).workspaces == ["team-a"]
    assert jobs.token_workspaces(token_hash(a)) is None
    assert revoke_token(jobs, token_hash(b)[:8].upper()).workspaces == ["team-b"]
    assert jobs.list_tokens() == []


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("abc", "at least 8 hex digits"),
        ("not-hex-at-all", "at least 8 hex digits"),
        ("hb_unknown", "no such token"),
        ("00000000", "no such token"),
    ],
)
def test_revoke_refuses_what_names_no_single_token(jobs: JobStore, given: str, message: str) -> None:
    create_token(jobs, ["team-a"])
    with pytest.raises(ConfigError, match=message):
        revoke_token(jobs, given)
    assert len(jobs.list_tokens()) == 1


def test_an_id_prefix_matching_two_tokens_is_refused(jobs: JobStore) -> None:
    jobs.add_token("ab" * 32, ["x"])
    jobs.add_token("ab" * 31 + "cd", ["y"])
    with pytest.raises(ConfigError, match="2 tokens start with"):
        revoke_token(jobs, "abababab")
    assert len(jobs.list_tokens()) == 2


def test_a_revoked_token_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.db")
    service = JobService(store)
    token = create_token(service.jobs, ["default"])
    headers = {"Authorization": f"Bearer {token}"}
    running = TestClient(create_app(service))
    assert running.get(JOBS, headers=headers).status_code == 200
    no_cache = TokenCache(service.jobs, ttl=0.0)
    assert no_cache.workspaces(token_hash(token)) == ["default"]
    revoke_token(service.jobs, token)
    assert no_cache.workspaces(token_hash(token)) is None
    assert TestClient(create_app(service)).get(JOBS, headers=headers).status_code == 401
    store.close()


def test_cli_lists_and_revokes(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    runner = CliRunner()
    made = runner.invoke(app, ["new-token", "--workspace", "team-a", "--label", "ci", "--store", str(db)])
    assert made.exit_code == 0, made.output
    token = made.output.strip()
    listed = runner.invoke(app, ["tokens", "--store", str(db)])
    assert listed.exit_code == 0 and token_hash(token)[:12] in listed.output and "team-a" in listed.output
    assert token not in listed.output
    gone = runner.invoke(app, ["revoke-token", token_hash(token)[:12], "--store", str(db)])
    assert gone.exit_code == 0 and f"revoked token {token_hash(token)[:12]}" in gone.output
    again = runner.invoke(app, ["revoke-token", token_hash(token)[:12], "--store", str(db)])
    assert again.exit_code == 1
    assert again.output.strip().splitlines() == ["error: no such token (healthbench tokens lists them)"]


def test_listing_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["tokens", "--store", str(tmp_path / "none.db")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert not (tmp_path / "none.db").exists()


BOOT = "hb_" + "b" * 40


def test_bootstrap_token_from_the_environment_is_the_first_token(jobs: JobStore) -> None:
    env = {BOOTSTRAP_TOKEN_ENV: f" {BOOT}\n"}
    assert bootstrap_token(jobs, env) is True
    assert jobs.token_workspaces(token_hash(BOOT)) == ["*"]
    assert first_token(jobs) is None  # no second, printed token
    assert bootstrap_token(jobs, {BOOTSTRAP_TOKEN_ENV: "hb_" + "c" * 40}) is False  # a store with tokens
    assert [t.label for t in jobs.list_tokens()] == [f"${BOOTSTRAP_TOKEN_ENV}"]
    assert bootstrap_token(jobs, {}) is False


@pytest.mark.parametrize("given", ["b" * 40, "hb_short", "hb_" + "b" * 20 + " " + "b" * 20])
def test_a_malformed_bootstrap_token_is_refused(jobs: JobStore, given: str) -> None:
    with pytest.raises(ConfigError) as refused:
        bootstrap_token(jobs, {BOOTSTRAP_TOKEN_ENV: given})
    assert str(refused.value).startswith(f"${BOOTSTRAP_TOKEN_ENV}: a token is 'hb_' followed by")
    assert given not in str(refused.value) and jobs.count_tokens() == 0


def test_serve_takes_the_bootstrap_token_and_never_prints_it(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    with service_process(store, env={BOOTSTRAP_TOKEN_ENV: BOOT}) as service:
        with Client(service.url, token=BOOT) as client:
            assert client.evaluation.benchmark_jobs.list().pagination.total == 0
        with Client(service.url, token="hb_" + "x" * 40) as stranger, pytest.raises(ServiceError) as refused:
            stranger.evaluation.benchmark_jobs.list()
    assert refused.value.status == 401


def test_serve_refuses_a_malformed_bootstrap_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BOOTSTRAP_TOKEN_ENV, "not-a-token")
    result = CliRunner().invoke(app, ["serve", "--store", str(tmp_path / "s.db")])
    assert result.exit_code != 0
    assert f"${BOOTSTRAP_TOKEN_ENV}: a token is 'hb_'" in result.output
    assert "not-a-token" not in result.output
