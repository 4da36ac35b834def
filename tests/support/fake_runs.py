"""Run configs whose candidate and judge are the fake server: one definition for tests and benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from healthbench.config import RunConfig, build_config

FAKE_CANDIDATE, FAKE_JUDGE = "fake-candidate", "fake-judge"
# retries that end within a second: a fault the fake server injects is retried at once
FAST_RETRY = {"max_retries": 12, "initial_delay": 0.01, "max_delay": 0.05}


def fake_run_config(url: str, data: Path | str | None = None, **extra: Any) -> RunConfig:
    """A run answered by the fake server at ``url`` with `FAST_RETRY`: the demo data, or the
    full-format JSONL ``data``; ``extra`` are further config fields (they win)."""
    layer: dict[str, Any] = {
        "model": {"spec": FAKE_CANDIDATE, "base_url": url},
        "judge": {"spec": FAKE_JUDGE, "base_url": url},
        "retry": FAST_RETRY,
    }
    if data is not None:
        layer["data"] = str(data)  # the file is the data (a dataset name beside it is refused)
    layer.update(extra)
    return build_config(layer)
