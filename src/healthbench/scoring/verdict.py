"""`Verdict`, the judge's decision on one criterion (no numpy: the store's readers name verdicts
without loading the scoring core; `healthbench.scoring.rubric` re-exports it)."""

from __future__ import annotations

from enum import Enum


class Verdict(Enum):
    """The judge's decision on one criterion: met, not met, or ungraded (no usable answer)."""

    NOT_MET = 0
    MET = 1
    UNGRADED = -1

    @classmethod
    def of(cls, criteria_met: bool | None) -> Verdict:
        if criteria_met is None:
            return cls.UNGRADED
        return cls.MET if criteria_met else cls.NOT_MET

    @property
    def criteria_met(self) -> bool | None:
        return None if self is Verdict.UNGRADED else self is Verdict.MET
