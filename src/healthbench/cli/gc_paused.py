"""`gc_paused`: cyclic garbage collection off while a batch of acyclic objects is built.

It toggles the process-wide collector, so only a command that owns its process uses it (`cli/`):
library code is also called by the job service's worker threads and must leave the collector alone
(tests/test_gc_paused.py checks that a rescore in a thread never turns it off)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block, then restore its previous state.

    Decoding a whole results file builds ~10^5 lists and strings that hold no cycles; every
    collection their allocation triggers walks all of them again, which is about half the decoding
    time. Reference counting still frees everything as usual.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
