"""Option groups are declared once: a command takes a group whole (`takes_groups`) and receives it as
one typed object; the groups shared by run, regrade and meta-eval read the same in each."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from healthbench.cli import app, load_all
from healthbench.cli.option_groups import (
    CallOptions,
    JudgeOptions,
    OptionGroup,
    RunControl,
    ScoreFiles,
    TraceOptions,
    takes_groups,
)
from healthbench.cli.options import StoreOpt


def test_a_command_receives_its_groups_built_from_their_flags(tmp_path: Path) -> None:
    seen: list[object] = []
    demo = typer.Typer(rich_markup_mode=None)  # click's plain help layout

    @demo.command()
    @takes_groups
    def show(
        name: Annotated[str, typer.Argument()],
        *,
        judging: JudgeOptions,
        store: StoreOpt = None,
        files: ScoreFiles,
        control: RunControl,
    ) -> None:
        seen.extend([name, judging, store, files, control])

    out = tmp_path / "m.json"
    args = ["r1", "--judge-temperature", "0.5", "--profile", "inspect", "--metrics-out", str(out)]
    result = CliRunner().invoke(demo, [*args, "--strict", "--store", "s.db"])
    assert result.exit_code == 0, result.output
    assert seen == [
        "r1",
        JudgeOptions(judge_temperature=0.5, profile="inspect"),
        "s.db",
        ScoreFiles(metrics_out=out),
        RunControl(strict=True),
    ]
    # a group's options are in the help in the group's order, with their own help texts
    help_text = " ".join(CliRunner().invoke(demo, ["--help"]).output.split())
    judge_flags = ["--judge-base-url", "--judge-api-key-env", "--judge-temperature", "--grader-template"]
    positions = [help_text.index(flag) for flag in judge_flags]
    assert positions == sorted(positions)
    assert "Write the flat metrics JSON" in help_text


def test_an_option_declared_twice_is_refused_when_the_command_is_defined() -> None:
    def twice(*, files: ScoreFiles, metrics_out: str | None = None) -> None: ...

    with pytest.raises(TypeError, match="twice: options declared twice: metrics_out"):
        takes_groups(twice)


SHARED: dict[type[OptionGroup], tuple[str, ...]] = {
    JudgeOptions: ("run", "regrade", "meta-eval"),
    CallOptions: ("run", "regrade", "meta-eval"),
    RunControl: ("run", "regrade", "meta-eval"),
    ScoreFiles: ("run", "regrade", "results"),
    TraceOptions: ("run", "regrade", "meta-eval"),
}


@pytest.mark.parametrize("group", list(SHARED), ids=lambda group: group.__name__)
def test_a_shared_group_is_the_same_options_in_every_command(group: type[OptionGroup]) -> None:
    load_all()
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    fields = [field.name for field in dataclasses.fields(group)]  # type: ignore[arg-type]
    declared = {}
    for name in SHARED[group]:
        params = {param.name: param for param in commands[name].params}
        declared[name] = [(params[f].opts, params[f].help, params[f].default) for f in fields]
        names = [param.name for param in commands[name].params]
        start = names.index(fields[0])
        assert names[start : start + len(fields)] == fields, name  # together, in the group's order
    assert len({repr(options) for options in declared.values()}) == 1, declared
    assert group.commands == ", ".join(SHARED[group])  # the group's own note says where it is used
