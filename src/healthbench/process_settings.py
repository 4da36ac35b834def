"""Process-wide settings of a command-line run, applied before the command line's own imports (this
module imports nothing heavy): `python -m healthbench` applies them first, `healthbench.cli.main` too.

- OpenBLAS keeps to one thread unless ``OPENBLAS_NUM_THREADS`` says otherwise: our matrix products are
  small (`healthbench.scoring.bootstrap`), and its thread pool costs ~30 ms of CPU to start with numpy.
- Cycles are collected every `GC_ALLOCATIONS` allocations instead of 700: a command builds many
  long-lived objects (imported modules, decoded files) and few cycles (mypy's main does the same).
- `settle` (`gc.freeze`) before the command runs and when it ends: the objects alive then (the
  imported modules; at exit, whatever is left) are never walked by a collection again, including the
  interpreter's last one at exit. Nothing is skipped: atexit handlers and finalizers still run.
"""

from __future__ import annotations

import gc
import os

GC_ALLOCATIONS = 50_000  # allocations between collections of the youngest generation (default 700)


def apply() -> None:
    """Apply the settings (idempotent)."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    gc.set_threshold(GC_ALLOCATIONS, *gc.get_threshold()[1:])


def settle() -> None:
    """Keep every object alive now out of later collections (`gc.freeze`; see the module doc)."""
    gc.freeze()
