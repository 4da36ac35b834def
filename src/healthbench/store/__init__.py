"""The run store (SQLite by default): runs, samples, grades and the call cache.

Its names load `healthbench.store.runs` (and SQLAlchemy) on first use, so that importing a light
module of the package (``healthbench.store.location``: where the store is) costs nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from healthbench.store.runs import GradeRow, RunRecord, SampleRow, Store

__all__ = ["GradeRow", "RunRecord", "SampleRow", "Store"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from healthbench.store import runs

        return getattr(runs, name)
    raise AttributeError(f"module 'healthbench.store' has no attribute {name!r}")
