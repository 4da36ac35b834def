"""The majority panel rule written out by hand (docs/panels.md), for tests to compare the project's
`healthbench.scoring.panel` against."""

from __future__ import annotations

from collections.abc import Sequence

from healthbench.scoring.verdict import Verdict

M, N, U = Verdict.MET, Verdict.NOT_MET, Verdict.UNGRADED


def majority(votes: Sequence[Verdict]) -> Verdict:
    """Ungraded unless most members graded; more met than not met, or the first graded member's vote
    on a tie."""
    graded = [v for v in votes if v is not U]
    if 2 * len(graded) <= len(votes):
        return U
    met = sum(v is M for v in graded)
    if 2 * met == len(graded):
        return graded[0]
    return M if 2 * met > len(graded) else N
