"""The flat metrics JSON written by ``--metrics-out`` (key families documented in docs/metrics.md).

Keys keep the order `RunScore.metrics()` gives them (simple-evals' first-seen order), indented by 2;
NaN and infinities, which JSON cannot carry, are written as ``null``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from healthbench.atomic import atomic_writer


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (recursively through dicts and lists)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def write_json_atomic(
    path: str | os.PathLike[str], payload: Any, *, indent: int | None = 2, ensure_ascii: bool = True
) -> Path:
    """Write ``payload`` as JSON atomically (see `healthbench.atomic`), with the usual permissions."""
    target = Path(path)
    text = json.dumps(json_safe(payload), indent=indent, ensure_ascii=ensure_ascii, allow_nan=False)
    with atomic_writer(target) as out:
        out.write(text.encode("utf-8") + b"\n")
    return target


def write_metrics(path: str | os.PathLike[str], metrics: Mapping[str, Any]) -> Path:
    """Write a run's flat metrics (``RunScore.metrics()``) atomically, in insertion order."""
    return write_json_atomic(path, dict(metrics), indent=2)
