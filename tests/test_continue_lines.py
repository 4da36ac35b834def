"""Every command the CLI prints for continuing a run runs as printed (issue #32 item 9): each printed
command is run, from another folder, with no $HEALTHBENCH_STORE and an empty default store."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from healthbench.testing.fake_server import running_fake_server

META = Path(__file__).parent / "fixtures" / "meta_eval_small.jsonl"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No store named by the environment; the default store (user data folder) empty."""
    out = {k: v for k, v in os.environ.items() if k != "HEALTHBENCH_STORE"}
    out.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "home" / "data"))
    return out


def _healthbench(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "healthbench", *args], capture_output=True, text=True, env=env, cwd=cwd,
        timeout=120,
    )  # fmt: skip


def _printed(pattern: str, text: str) -> list[str]:
    """The command printed where ``pattern`` (with one group) matches, as argv after `healthbench`."""
    found = re.search(pattern, " ".join(text.split()))
    assert found is not None, text
    words = shlex.split(found.group(1))
    assert words[0] == "healthbench"
    return words[1:]


def test_the_ungraded_criteria_warning_names_a_command_that_runs(tmp_path: Path, env: dict[str, str]) -> None:
    template = tmp_path / "t.txt"  # no verdict marker: the fake judge answers prose, never a verdict
    template.write_text("Grade <<conversation>> on <<rubric_item>>.")
    db = tmp_path / "store" / "s.db"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with running_fake_server() as url:
        first = _healthbench(
            ["run", "--model", "fake-candidate", "--base-url", url, "--judge", "fake-judge",
             "--judge-base-url", url, "--grader-template", str(template), "--judge-retries", "0",
             "--limit", "1", "--name", "u", "--store", str(db)],
            env, tmp_path,
        )  # fmt: skip
        assert first.returncode == 0, first.stderr
        command = _printed(
            r"ungraded in 1 conversations \(left out of the scores\); `([^`]+)` grades", first.stderr
        )
        assert command == ["run", "--resume", "u", "--store", str(db)]
        again = _healthbench(command, env, elsewhere)
    assert again.returncode == 0, again.stderr
    assert "criteria ungraded" in again.stderr  # the same template: still ungraded, but it ran


def test_a_continue_line_names_the_command_of_the_runs_kind(tmp_path: Path, env: dict[str, str]) -> None:
    """`run --resume` of a meta-eval run: the error's continue line is `meta-eval --resume`, which runs."""
    db = tmp_path / "s.db"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with running_fake_server() as url:
        made = _healthbench(
            ["meta-eval", "--judge", "fake-judge", "--judge-base-url", url, "--data", str(META),
             "--name", "m", "--store", str(db)],
            env, tmp_path,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        wrong = _healthbench(["run", "--resume", "m", "--store", str(db)], env, tmp_path)
        assert wrong.returncode != 0
        command = _printed(r"continue with: (.+)$", wrong.stderr)
        assert command == ["meta-eval", "--resume", "m", "--store", str(db)]
        assert _healthbench(command, env, elsewhere).returncode == 0
        results = _healthbench(["results", "m", "--store", str(db)], env, tmp_path)
        command = _printed(r"use `([^`]+)`", results.stderr)
        assert _healthbench(command, env, elsewhere).returncode == 0
