"""The typer application every command module registers on, and the one place errors become exits.

Command modules are imported lazily (`LazyGroup`): ``healthbench --help`` lists every command from
`healthbench.cli.COMMANDS` without importing any of them, and ``healthbench CMD`` imports only the
module that defines CMD. A module imported by other means (tests, plugins) simply registers as usual.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperCommand, TyperGroup

from healthbench import __version__
from healthbench.errors import HealthBenchError, Terminated


@dataclass(frozen=True)
class LazyCommand:
    """Where a command is defined and its one-line summary (shown by ``healthbench --help``; a test
    checks it is the command's own first paragraph)."""

    module: str
    summary: str


# click's Context, Command and HelpFormatter: typer uses its own copy of click from 0.24 on (a private
# module) and the click package before, so they are named only through typer's public classes
ClickContext = Any
ClickCommand = Any


class LazyGroup(TyperGroup):
    """A typer group that imports a command's module only when the command is used (module doc)."""

    _listing = False  # True while the group's own help lists the commands

    def list_commands(self, ctx: ClickContext) -> list[str]:
        return sorted(set(self.commands) | set(_lazy_commands()))

    def get_command(self, ctx: ClickContext, cmd_name: str) -> ClickCommand | None:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        spec = _lazy_commands().get(cmd_name)
        if spec is None:
            return None
        if self._listing:
            return TyperCommand(name=cmd_name, help=spec.summary, short_help=spec.summary)
        importlib.import_module(spec.module)
        command = _built(cmd_name)
        if command is not None:
            self.commands[cmd_name] = command
        return command

    def get_help_option(self, ctx: ClickContext) -> Any:
        """The group's ``--help``, defaulting to False rather than None: typer coerces a None flag
        through a pydantic adapter, which would load pydantic (~0.04 s) for every ``COMMAND --help``."""
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the app; a usage error (a bad option value, a missing argument, an unknown option) is one
        line on stderr like every other error (click's own is a box of 5-6 lines), exit 2."""
        if not kwargs.pop("standalone_mode", True):
            return super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[misc]
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[misc]
        except typer.Abort:
            raise SystemExit(fail("aborted").exit_code) from None
        except Exception as exc:
            if not isinstance(exc, CLICK_ERROR):
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # no arguments: the command's help
                from typer import rich_utils

                rich_utils.rich_format_error(exc)  # type: ignore[arg-type]
                sys.exit(getattr(exc, "exit_code", 2))
            raise SystemExit(usage_error(exc).exit_code) from None
        sys.exit(code if isinstance(code, int) else 0)

    def format_help(self, ctx: ClickContext, formatter: Any) -> None:
        """The group's own help, in click's plain layout: typer's rich layout imports rich.markdown
        and pygments, which alone take longer than the 0.3 s ``healthbench --help`` may take."""
        self._listing = True
        try:
            super(TyperGroup, self).format_help(ctx, formatter)  # click's own, not typer's rich one
        finally:
            self._listing = False


def _lazy_commands() -> dict[str, LazyCommand]:
    from healthbench.cli import COMMANDS

    return COMMANDS


def _built(name: str) -> ClickCommand | None:
    """The click command (or group) registered on `app` under ``name``, if any (built through typer's
    public `typer.main.get_command`, from the commands registered so far)."""
    return typer.main.get_command(app).commands.get(name)  # type: ignore[attr-defined]


app = typer.Typer(
    name="healthbench",
    help="Run, grade and analyse HealthBench on any chat model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help layout: typer's rich one loads rich.markdown (~0.3 s)
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class OutputConsole(Console):
    """Standard output. A reader that stops early (``healthbench compare A B | head -1``) ends the
    printing quietly and the command goes on to its own exit code (a gate's 3 under ``pipefail``),
    where rich would exit 1: the rest goes to the null device (Python's note on SIGPIPE)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        with contextlib.suppress(OSError, ValueError):  # (no file descriptor: nothing to redirect)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


console = OutputConsole()
err_console = Console(stderr=True)

P = ParamSpec("P")
R = TypeVar("R")


def say(text: str, *, style: str | None = None, stderr: bool = False) -> None:
    """Print user-provided text literally (never read as rich markup), unwrapped so it stays copyable."""
    (err_console if stderr else console).print(Text(text, style=style or ""), soft_wrap=True)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one line on stderr and return the Exit to raise (the message is printed literally)."""
    err_console.print(Text.assemble(("error:", "bold red"), " ", message), highlight=False, soft_wrap=True)
    return typer.Exit(code)


# click's ClickException (UsageError, BadParameter, NoSuchOption, ...), named through typer's public
# BadParameter: typer vendors its own click from 0.24 on and used the click package before
CLICK_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def usage_error(exc: Any) -> typer.Exit:
    """Print a click usage error as one line naming the command's help, and return its Exit."""
    message = " ".join(exc.format_message().split()).removesuffix(".")
    ctx = getattr(exc, "ctx", None)
    hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    return fail(f"{message}{hint}", exc.exit_code)


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
        except KeyboardInterrupt as exc:  # (a run's own message says what is saved: `continuable`)
            terminated = isinstance(exc, Terminated)
            raise fail("terminated" if terminated else "interrupted", 143 if terminated else 130) from None
        except OSError as exc:
            raise fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)) from None

    return wrapper


def main() -> None:
    from healthbench import cli  # noqa: F401  (registers the commands)

    # our matrix products are small: OpenBLAS keeps to one thread unless told otherwise (its thread
    # pool costs ~30 ms of CPU to start with numpy, which every command imports after this)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # a store failure is one line of ours: the database driver's own warnings (psycopg's "error ignored
    # terminating ..." when the server goes away) are not printed beside it
    logging.getLogger("psycopg").addHandler(logging.NullHandler())
    sys.exit(app())
