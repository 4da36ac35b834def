"""The two eval file formats (classic HealthBench, HealthBench Professional), told apart by the
distinctive keys of a file's first row, and how a file is given to a reader (a path, or its bytes).
Light on purpose (only ``json``): the run config checks a file's format without loading a reader."""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

Source = str | os.PathLike[str] | bytes  # a path, or a file's bytes (named by ``name`` in errors)
Format = Literal["classic", "professional"]
CLASSIC: Format = "classic"
PROFESSIONAL: Format = "professional"
FORMAT_NAMES = {CLASSIC: "classic HealthBench", PROFESSIONAL: "HealthBench Professional"}
PROFESSIONAL_GROUP = "professional"  # the ideal_completions_group of a physician_response
TASK_TAGS = ("use_case", "type", "difficulty", "specialty")  # a Professional task's example tags


def format_of_row(raw: Any) -> Format | None:
    """Which schema a parsed JSON line follows, by its distinctive keys (None: neither)."""
    if not isinstance(raw, dict):
        return None
    if "rubric_items" in raw and "conversation" in raw:
        return PROFESSIONAL
    if "rubrics" in raw and "prompt" in raw:
        return CLASSIC
    return None


def detect_format(lines: Iterable[str | bytes]) -> Format:
    """The format of the first line that names one (classic when none does: its errors are clearer)."""
    for line in lines:
        if line.strip():
            try:
                found = format_of_row(json.loads(line))
            except (ValueError, RecursionError):
                return CLASSIC
            if found is not None:
                return found
    return CLASSIC


def file_format(source: Source) -> Format:
    """The format of an eval file from its first line that names one (classic when unreadable)."""
    if isinstance(source, bytes):
        return detect_format(_lines_of(source.removeprefix(codecs.BOM_UTF8)))
    try:
        with Path(source).open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.strip():
                    return detect_format([line.removeprefix("\ufeff")])
    except OSError:
        pass
    return CLASSIC


def _lines_of(data: bytes) -> Iterator[bytes]:
    """The lines of ``data`` one by one (the first few are all format detection reads)."""
    start = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        yield data[start:end]
        start = end + 1
