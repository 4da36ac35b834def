"""Process-wide settings of a command-line run, applied before the command line's own imports (this
module imports nothing heavy): `python -m healthbench` applies them first, `healthbench.cli.main` too.

- OpenBLAS keeps to one thread unless ``OPENBLAS_NUM_THREADS`` says otherwise: our matrix products are
  small (`healthbench.scoring.bootstrap`), and its thread pool costs ~30 ms of CPU to start with numpy.
- Cycles are collected every `GC_ALLOCATIONS` allocations instead of 700: a command builds many
  long-lived objects (imported modules, decoded files) and few cycles (mypy's main does the same).
"""

from __future__ import annotations

import gc
import os

GC_ALLOCATIONS = 50_000  # allocations between collections of the youngest generation (default 700)


def apply() -> None:
    """Apply the settings (idempotent)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc.set_threshold(GC_ALLOCATIONS, *gc.get_threshold()[1:])
