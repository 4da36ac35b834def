"""The flat metrics JSON written by ``--metrics-out`` (key families documented in docs/metrics.md).

Keys keep the order `RunScore.metrics()` gives them (simple-evals' first-seen order), indented by 2;
NaN and infinities, which JSON cannot carry, are written as ``null``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (recursively through dicts and lists)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


@contextmanager
def atomic_text_file(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A text file written in the target's directory and renamed onto ``path`` only when the block
    ends without an error (readers never see a half-written file; a failure leaves no file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            yield out
        os.replace(temp_name, target)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def write_json_atomic(
    path: str | os.PathLike[str], payload: Any, *, indent: int | None = 2, ensure_ascii: bool = True
) -> Path:
    """Write ``payload`` as JSON through a temporary file in the same directory, then rename it."""
    text = json.dumps(json_safe(payload), indent=indent, ensure_ascii=ensure_ascii, allow_nan=False)
    with atomic_text_file(path) as out:
        out.write(text)
        out.write("\n")
    return Path(path)


def write_metrics(
    path: str | os.PathLike[str], metrics: Mapping[str, Any], provenance: Mapping[str, Any] | None = None
) -> Path:
    """Write a run's flat metrics (``RunScore.metrics()``) atomically, in insertion order, followed by
    its ``provenance`` keys (``profile``, ``grader_template_sha256``) when given."""
    return write_json_atomic(path, {**metrics, **(provenance or {})}, indent=2)
