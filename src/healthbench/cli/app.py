"""The typer application every command module registers on, and the one place errors become exits."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from healthbench import __version__
from healthbench.errors import HealthBenchError

app = typer.Typer(
    name="healthbench",
    help="Run, grade and analyse HealthBench on any chat model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

console = Console()
err_console = Console(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")


def say(text: str, *, style: str | None = None, stderr: bool = False) -> None:
    """Print user-provided text literally (never read as rich markup), unwrapped so it stays copyable."""
    (err_console if stderr else console).print(Text(text, style=style or ""), soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one line on stderr and return the Exit to raise (the message is printed literally)."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", message), soft_wrap=True)
    return typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        console.print(Text(f"healthbench {__version__}"))
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Run, grade and analyse HealthBench on any chat model."""


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
