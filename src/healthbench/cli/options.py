"""Options shared by several commands, declared once so their help texts stay the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from healthbench.errors import ConfigError

StoreOpt = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="Run store: a SQLite file or a SQLAlchemy URL. Default: $HEALTHBENCH_STORE, else "
        "healthbench.db in the user data dir.",
        show_default=False,
    ),
]
MetricsOutOpt = Annotated[
    Path | None,
    typer.Option(
        "--metrics-out", help="Write the flat metrics JSON (simple-evals key style, see docs/metrics.md)."
    ),
]
AllResultsOpt = Annotated[
    Path | None,
    typer.Option("--allresults-out", help="Write a simple-evals `_allresults.json` export of the run."),
]
SeedOpt = Annotated[
    int | None, typer.Option("--seed", help="Bootstrap seed (default 0).", show_default=False)
]
ResamplesOpt = Annotated[
    int | None, typer.Option("--n-resamples", help="Bootstrap resamples (default 1000).", show_default=False)
]


def parse_json_option(name: str, value: str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name}: not valid JSON ({exc.msg})") from None
    if not isinstance(parsed, dict):
        raise ConfigError(f"{name}: expected a JSON object")
    return parsed


def split_list(values: list[str] | None) -> list[str] | None:
    """Accept repeated options and comma-separated values alike."""
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]
