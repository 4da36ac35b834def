"""Help is fast: `healthbench --help` and every `COMMAND --help` load none of the libraries that take
a tenth of a second or more to import, nor does listing the runs load numpy; a command loads what it
uses (`results NAME` of a single judge's run no panel, meta-eval or dataset module, `report FILE`
no dataset reader); the summaries `healthbench --help` shows are the commands' own."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from healthbench.cli import COMMANDS, app, load_all

# what a user waits for when these are imported: each takes a tenth of a second or more to load
HEAVY = ("numpy", "polars", "sqlalchemy")


def healthbench_imports(*args: str) -> tuple[str, set[str]]:
    """What a fresh ``healthbench ARGS`` process prints, and the modules it has imported when it exits."""
    code = (
        "import sys\n"
        "from healthbench.cli import main\n"
        f"sys.argv = ['healthbench', *{list(args)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('MODULES', ' '.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "MODULES" in result.stdout, result.stderr
    printed, _, modules = result.stdout.rpartition("MODULES ")
    return printed, set(modules.split())


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in HEAVY if m in modules)


def test_help_lists_every_command_without_loading_numpy_polars_or_sqlalchemy() -> None:
    printed, modules = healthbench_imports("--help")
    assert [name for name in COMMANDS if name not in printed] == []
    assert heavy(modules) == []


# one command per module: the commands of a module load the same
ONE_PER_MODULE = sorted({spec.module: name for name, spec in COMMANDS.items()}.values())


@pytest.mark.parametrize("command", ONE_PER_MODULE)
def test_every_commands_help_loads_no_numpy_polars_or_sqlalchemy(command: str) -> None:
    printed, modules = healthbench_imports(command, "--help")
    assert "Usage:" in printed and heavy(modules) == []


# a panel's rules and agreement, the meta-eval and correction core, the dataset readers and their
# records' pydantic schema: what a single judge's stored run and a results file are shown without
PANEL_AND_DATASET = (
    "healthbench.results.panel_scores",
    "healthbench.scoring.panel",
    "healthbench.scoring.meta",
    "healthbench.scoring.correction",
    "healthbench.data.sources",
    "healthbench.data.schema",
)


def imported_run(tmp_path: Path, fixtures_dir: Path) -> Path:
    """A store holding run ``r``: ``small_allresults.json`` imported (one judge)."""
    store = tmp_path / "runs.db"
    command = ["import", str(fixtures_dir / "small_allresults.json"), "--n-resamples", "0"]
    subprocess.run(
        [sys.executable, "-m", "healthbench", *command, "--store", str(store), "--name", "r"],
        capture_output=True,
        check=True,
    )
    return store


def test_listing_runs_loads_no_numpy_or_polars(tmp_path: Path, fixtures_dir: Path) -> None:
    store = imported_run(tmp_path, fixtures_dir)
    printed, runs = healthbench_imports("runs", "--store", str(store))
    assert "r" in printed.split()
    assert "sqlalchemy" in runs  # it did read the store
    assert [m for m in ("numpy", "polars") if m in runs] == []


def test_results_of_a_single_judges_run_loads_no_panel_meta_eval_or_dataset_module(
    tmp_path: Path, fixtures_dir: Path
) -> None:
    store = imported_run(tmp_path, fixtures_dir)
    shown = ("results", "r", "--store", str(store))
    printed, modules = healthbench_imports(*shown)
    assert "overall_score" in printed  # it did score and show the run
    assert [m for m in PANEL_AND_DATASET if m in modules] == []
    metrics = tmp_path / "metrics.json"  # the metrics document is still built when asked for
    printed, modules = healthbench_imports(*shown, "--metrics-out", str(metrics))
    assert f"metrics written to {metrics}" in printed and "overall_score" in json.loads(metrics.read_text())
    assert [m for m in PANEL_AND_DATASET if m in modules] == []


def test_report_of_a_results_file_loads_no_dataset_reader(tmp_path: Path, fixtures_dir: Path) -> None:
    out = tmp_path / "report.html"
    file = fixtures_dir / "small_allresults.json"
    printed, modules = healthbench_imports("report", str(file), "-o", str(out))
    assert out.exists() and f"report: {out}" in printed
    assert [m for m in PANEL_AND_DATASET if m in modules] == []


def test_summaries_are_the_commands_own_first_paragraph() -> None:
    load_all()
    group = typer.main.get_command(app)
    for name, spec in COMMANDS.items():
        command = group.commands[name]  # type: ignore[attr-defined]
        first = (command.help or inspect.getdoc(command.callback) or "").split("\n\n")[0]
        assert spec.summary == " ".join(first.split()), f"update healthbench.cli.COMMANDS[{name!r}]"
    assert set(group.commands) == set(COMMANDS)  # type: ignore[attr-defined]


def test_a_lazy_command_runs_and_an_unknown_one_is_refused() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["compare", "--help"])
    assert result.exit_code == 0 and "--fail-if-worse-by" in result.stdout
    result = runner.invoke(app, ["no-such-command"])
    assert result.exit_code == 2 and "No such command" in result.stderr
