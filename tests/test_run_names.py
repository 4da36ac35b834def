"""A run name is a run name in every command (issue 32): ``team/nightly`` works for ``run`` and
``results``, and ``report``, ``compare`` and ``analyze`` read it from the store too (they took any
name with a ``/`` or ending in ``.json`` for a path). An existing file or folder is still read as one,
and a name that is neither says so."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import judged_run_args, one_line_error
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app

runner = CliRunner()


@pytest.fixture(scope="module")
def store(server: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("names") / "runs.db"
    args = judged_run_args(server, path, "--model", "cand", "--base-url", server, "--limit", "2")
    for name in ("team/nightly", "team/base.json"):
        result = runner.invoke(app, [*args, "--name", name])
        assert result.exit_code == 0, result.output
    return path


def test_a_run_name_with_a_slash_is_a_run_in_report_compare_and_analyze(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no file or folder "team" here
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", "team/nightly", "--store", str(store), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "<!doctype html>" in out.read_text()[:100]
    compared = runner.invoke(
        app, ["compare", "team/base.json", "team/nightly", "--store", str(store)], env={"COLUMNS": "200"}
    )
    assert compared.exit_code == 0, compared.output
    pattern = r"B = cand/team/nightly \((\d\.\d+)\) vs A = cand/team/base\.json \((\d\.\d+)\)"
    line = re.search(pattern, compared.output)
    assert line is not None, compared.output
    assert line[1] == line[2]  # the same model and judge on the same conversations
    analyzed = runner.invoke(app, ["analyze", "team/nightly", "--store", str(store), "--out", "tables"])
    assert analyzed.exit_code == 0, analyzed.output
    result = runner.invoke(app, ["results", "team/nightly", "--store", str(store)])
    assert result.exit_code == 0, result.output


def test_a_name_that_is_neither_a_path_nor_a_run_says_both(store: Path, tmp_path: Path) -> None:
    missing = str(tmp_path / "nope_allresults.json")
    result = runner.invoke(app, ["compare", missing, "team/nightly", "--store", str(store)])
    assert one_line_error(result).endswith(
        f"{missing}: no such file or folder, nor a run of that name in sqlite:///{store}"
    )


def test_runs_and_results_show_terminal_escapes_in_a_name_as_text(server: str, tmp_path: Path) -> None:
    """A run named with ESC sequences (clear the screen, a colour) is listed and titled with them
    escaped: no control character reaches the terminal."""
    store = tmp_path / "s.db"
    name = "evil\x1b[2J\x1b[31mred\u202e"
    args = judged_run_args(server, store, "--model", "cand", "--base-url", server, "--limit", "1")
    result = runner.invoke(app, [*args, "--name", name])
    assert result.exit_code == 0, result.output
    listed = runner.invoke(app, ["runs", "--store", str(store)], env={"COLUMNS": "300"})
    shown = runner.invoke(app, ["results", name, "--store", str(store)], env={"COLUMNS": "300"})
    for output in (listed.stdout, shown.stdout):
        assert "\x1b" not in output and "\u202e" not in output
        assert "evil\\x1b[2J\\x1b[31mred\\u202e" in output
