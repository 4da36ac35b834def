"""Small helpers shared by the CLI tests: argument lists for runs against the fake server, and the
one-line error check every bad input must pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def judged_run_args(url: str, store: Path | str, *extra: str) -> list[str]:
    """`healthbench run` with the fake server's judge at ``url``, the store at ``store`` and no retry;
    ``extra`` names what is answered (`--model ... --base-url ...`, `--completions ...`) and the rest."""
    judge = ["--judge", "judge", "--judge-base-url", url]
    return ["run", *judge, "--store", str(store), "--max-retries", "0", *extra]


def one_line_error(result: Any, code: int = 1) -> str:
    """The message of a CLI call that failed as bad input must: exit ``code``, one line on stderr, and
    no traceback anywhere."""
    assert result.exit_code == code, result.output
    text = str(result.stderr).strip()
    assert "Traceback" not in result.output and "Traceback" not in text
    assert len(text.splitlines()) == 1, text
    return text
