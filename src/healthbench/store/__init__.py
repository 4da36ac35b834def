"""The run store (SQLite by default): runs, samples, grades and the call cache."""

from healthbench.store.runs import GradeRow, RunRecord, SampleRow, Store

__all__ = ["GradeRow", "RunRecord", "SampleRow", "Store"]
