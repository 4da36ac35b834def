"""The one table from run / regrade / meta-eval flags to the run config, and what --resume refuses
(derived from the config's "how" fields, so a new run flag is refused without a hand list)."""

from __future__ import annotations

from typing import Any

import pytest
import typer

from healthbench.cli import app, load_all
from healthbench.cli.config_flags import CONFIG_FLAGS, config_layer, refuse_with_resume, resume_overrides
from healthbench.errors import ConfigError


def context(command: str, args: list[str]) -> typer.Context:
    load_all()
    group = typer.main.get_command(app)
    return group.commands[command].make_context(command, args)  # type: ignore[attr-defined,no-any-return]


RUN_ARGS = [
    *("--model", "m", "--base-url", "http://m", "--temperature", "0.5", "--system-message", "s"),
    *("--judge", "openai/j", "--judge-base-url", "http://j", "--judge-system-message", "js"),
    *("--judge-json", "--profile", "inspect", "--timeout", "9", "--grader-template", "g.txt"),
    *("--dataset", "hard", "--limit", "3", "--ids", "a,b", "--theme", "t", "--n-repeats", "2"),
    *("--completions", "physician", "--group", "Group 1", "--format", "classic"),
    *("--length-adjustment-center", "100", "--length-adjustment-penalty-per-500-chars", "0.5"),
    *("--name", "n", "--config", "c.toml"),
    # what --resume may change
    *("--max-connections", "3", "--rpm", "60", "--tpm", "1000", "--max-retries", "1", "--max-outage", "5"),
    *("--judge-retries", "0", "--prices", "p.json", "--cache-dir", "cache", "--executor", "local"),
    *("--ray-address", "auto", "--seed", "1", "--n-resamples", "10", "--dry-run", "--strict"),
]


def test_resume_refuses_every_flag_that_defines_the_run_and_nothing_else() -> None:
    ctx = context("run", ["--resume", "r", *RUN_ARGS])
    with pytest.raises(ConfigError) as info:
        refuse_with_resume(ctx, also=("data_format",))
    dropped = str(info.value).split("drop ")[1].split(" (or")[0].split(", ")
    assert dropped == [
        "--model", "--base-url", "--temperature", "--system-message", "--judge", "--judge-base-url",
        "--judge-system-message", "--judge-json", "--profile", "--grader-template",
        "--dataset", "--format", "--limit", "--ids", "--theme", "--n-repeats", "--name", "--config",
        "--timeout", "--length-adjustment-center", "--length-adjustment-penalty-per-500-chars",
        "--completions", "--group",
    ]  # fmt: skip


def test_resume_with_only_how_flags_passes_them_as_overrides() -> None:
    ctx = context(
        "run", ["--resume", "r", "--max-connections", "3", "--max-outage", "5", "--executor", "ray"]
    )
    refuse_with_resume(ctx)  # nothing refused
    assert resume_overrides(ctx.params) == {
        "max_connections": 3,
        "retry": {"max_outage": 5.0},
        "executor": "ray",
    }


def test_meta_eval_resume_refuses_its_selection_and_dry_run() -> None:
    ctx = context("meta-eval", ["--resume", "r", "--category", "c", "--dry-run", "--rpm", "5"])
    with pytest.raises(ConfigError, match=r"drop --category, --dry-run \(or"):
        refuse_with_resume(ctx, also=("dry_run",))


def test_one_layer_for_every_command() -> None:
    layer = config_layer(context("run", RUN_ARGS).params)
    assert layer["model"] == {
        "spec": "m",
        "base_url": "http://m",
        "settings": {"temperature": 0.5, "system_message": "s", "timeout": 9.0},
    }
    assert layer["judge"] == {
        "spec": "openai/j",
        "base_url": "http://j",
        "settings": {"system_message": "js", "timeout": 9.0},
    }
    assert (layer["ids"], layer["themes"], layer["grader_template"]) == (["a", "b"], ["t"], "g.txt")
    assert layer["scoring"] == {"seed": 1, "n_resamples": 10, "length_center": 100.0, "length_penalty": 0.5}
    assert layer["retry"] == {"max_retries": 1, "max_outage": 5.0}
    assert (layer["requests_per_minute"], layer["tokens_per_minute"]) == (60.0, 1000.0)
    # the same judge flags mean the same in regrade and meta-eval; a bare judge name asks the candidate's URL
    judge_args = ["--judge", "j", "--judge-temperature", "0", "--timeout", "4", "--rpm", "6"]
    regrade: dict[str, Any] = config_layer(context("regrade", ["src", *judge_args]).params, candidate=False)
    meta = config_layer(context("meta-eval", judge_args).params, candidate=False)
    assert (
        regrade["judge"] == meta["judge"] == {"spec": "j", "settings": {"temperature": 0.0, "timeout": 4.0}}
    )
    assert "model" not in regrade and "model" not in meta  # no candidate: --timeout is the judge's
    bare = config_layer(context("run", ["--base-url", "http://x", "--judge", "j"]).params)
    assert bare["judge"]["base_url"] == "http://x"


def test_every_flag_in_the_table_is_a_parameter_of_a_command() -> None:
    params = {
        p.name
        for name in ("run", "regrade", "meta-eval")
        for p in context(name, ["x"] if name == "regrade" else []).command.params
    }
    assert set(CONFIG_FLAGS) <= params
