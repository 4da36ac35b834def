"""`gc_paused`: cyclic garbage collection off while a batch of acyclic objects is built."""

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
