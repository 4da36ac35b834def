"""Commands load lazily: `healthbench --help` imports no command module, and the summaries it shows
are the commands' own."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from healthbench.cli import COMMANDS, app, load_all


def test_help_imports_no_command_module() -> None:
    code = (
        "import sys\n"
        "from healthbench.cli import main\n"
        "sys.argv = ['healthbench', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('numpy', 'sqlalchemy', 'pydantic', 'aiohttp', 'polars', 'healthbench.cli.run_cmd',\n"
        "         'mlflow', 'inspect_ai')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in result.stdout, result.stdout
    for name in COMMANDS:
        assert name in result.stdout


HEAVY = (
    "numpy",
    "polars",
    "sqlalchemy",
    "pydantic",
    "aiohttp",
    "httpx",
    "msgspec",
    "rich.markdown",
    "healthbench.config",
    "healthbench.store",
    "healthbench.runner",
    "healthbench.executors",
    "healthbench.models",
    "healthbench.scoring",
    "healthbench.results",
    "healthbench.data",
)


def healthbench_imports(*args: str) -> set[str]:
    """The modules a fresh ``healthbench ARGS`` process has imported when it exits."""
    code = (
        "import sys\n"
        "from healthbench.cli import main\n"
        f"sys.argv = ['healthbench', *{list(args)!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('MODULES', ' '.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(result.stdout.split("MODULES ")[-1].split())


def test_command_help_imports_only_what_it_shows() -> None:
    # `run --help` (the widest command) and the other commands that call models load their options
    # and typer, not the engine, the store, the models, pydantic or typer's rich help layout:
    # start-up stays that of `healthbench --help`
    for args in (
        ("run", "--help"),
        ("regrade", "--help"),
        ("meta-eval", "--help"),
        ("results", "--help"),
        ("analyze", "--help"),
    ):
        modules = healthbench_imports(*args)
        loaded = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
        assert loaded == [], (args, loaded)
        assert COMMANDS[args[0]].module in modules  # the command was built


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_read_only_commands_import_only_what_they_read(tmp_path: Path, fixtures_dir: Path) -> None:
    # `runs` reads the store through RunView without parsing any run's settings: no pydantic (not
    # even typer's coercion of --store), no numpy, no config; `results` scores (numpy, the config)
    # but loads no engine, model client, file writer it was not asked for, nor PostgreSQL's dialect;
    # shown again, it loads no more than `runs` does
    store = tmp_path / "runs.db"
    command = ["import", str(fixtures_dir / "small_allresults.json"), "--n-resamples", "0"]
    subprocess.run(
        [sys.executable, "-m", "healthbench", *command, "--store", str(store), "--name", "r"],
        capture_output=True,
        check=True,
    )
    runs = healthbench_imports("runs", "--store", str(store))
    assert "healthbench.cli.results_cmd" in runs and "sqlalchemy" in runs  # it did read the store
    light = ("numpy", "pydantic", "msgspec", "healthbench.config", "healthbench.data", "healthbench.runner")
    never = ("healthbench.executors", "aiohttp", "httpx", "polars", "sqlalchemy.dialects.postgresql")
    assert _loaded(runs, (*light, *never)) == []
    assert _loaded(runs, ("healthbench.scoring", "healthbench.models")) == [
        "healthbench.models",
        "healthbench.models.tally",
        "healthbench.scoring",
        "healthbench.scoring.verdict",
    ]
    results = healthbench_imports("results", "r", "--store", str(store))
    assert "healthbench.scoring.run_score" in results  # it did score the run
    unasked = (
        "healthbench.results.simple_evals",
        "healthbench.results.aggregate",
        "healthbench.results.rows",
        "healthbench.results.correction",
        "healthbench.results.mlflow_log",
        "healthbench.results.inspect_log",
    )  # (msgspec itself is loaded, ~3 ms: the run config's model specs write call keys with it)
    assert _loaded(results, (*never, *unasked, "healthbench.runner")) == []
    # shown again: the figures the first `results` remembered in the store are printed as they are,
    # without the scoring core, numpy, pydantic (not even typer's coercion of unset options), the
    # run config or the dataset records (docs/benchmarks.md: `results NAME` start-up)
    again = healthbench_imports("results", "r", "--store", str(store))
    assert "healthbench.results.figures" in again
    scoring = ("healthbench.scoring.rubric", "healthbench.scoring.run_score", "healthbench.scoring.stats")
    assert _loaded(again, (*light, *never, *unasked, *scoring)) == []


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
