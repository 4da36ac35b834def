"""The typer application every command module registers on, and the one place errors become exits."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from healthbench.errors import HealthBenchError

app = typer.Typer(
    name="healthbench",
    help="Run, grade and analyse HealthBench on any chat model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

console = Console()
err_console = Console(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one line on stderr and return the Exit to raise."""
    err_console.print(Text("error: ", style="bold red") + Text(message), highlight=False, soft_wrap=True)
    return typer.Exit(code)


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Translate every expected error into one line on stderr and a non-zero exit."""

    @wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except HealthBenchError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            raise fail("interrupted; everything finished so far is saved", 130) from None
        except OSError as exc:
            raise fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)) from None

    return wrapper


def main() -> None:
    from healthbench import cli  # noqa: F401  (registers the commands)

    sys.exit(app())
