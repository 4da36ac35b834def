"""Imported first by the benchmarks that use our test support: puts this checkout's ``src/`` and
``tests/`` on ``sys.path``, so that ``healthbench`` is this tree's and ``support`` is ``tests/support``
(the fake server process, the service process, the fake run config, the browser)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT / "tests", ROOT / "src"):  # src/ ends up first
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
