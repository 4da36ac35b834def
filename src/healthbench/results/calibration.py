"""The calibration of a panel's calibrated rule, read from stored meta-eval runs.

`load_calibration(store, names)` is the one entry point (``results RUN --panel calibrated
--calibrate-with META_RUN...``, ``meta-eval --calibrate-with``, and any other reader): each named run is a
meta-eval run of one judge or of a panel; every member it graded is measured against the physicians
(`healthbench.scoring.panel.calibration_from_meta`) and the runs' members are merged into one
`Calibration` (`merge_calibrations`: each member measured by exactly one run, the prior from the first).
"""

from __future__ import annotations

from collections.abc import Sequence

from healthbench.errors import RunError, a_kind
from healthbench.results.meta_results import stored_verdicts
from healthbench.scoring.panel import Calibration, calibration_from_meta, merge_calibrations
from healthbench.store.runs import Store


def load_calibration(store: Store, names: Sequence[str]) -> Calibration:
    """The error rates of every member of the meta-eval runs ``names`` and the physicians' base rate.

    Raises `RunError` (one line) on no name, a missing run, a run that is not a meta-eval, a run with
    no row the calibration can use, or a judge measured by two of the runs.
    """
    if not names:
        raise RunError("no meta-eval run to calibrate with: name one (--calibrate-with META_RUN)")
    parts: list[Calibration] = []
    measured_by: dict[str, str] = {}
    for name in names:
        run = store.require_run(name)
        if run.kind != "meta_eval":
            raise RunError(f"--calibrate-with needs meta-eval runs; {name!r} is {a_kind(run.kind)} run")
        rows, verdicts = stored_verdicts(store, run)
        for label in verdicts:
            if label in measured_by:
                raise RunError(
                    f"judge {label!r} is measured by two meta-eval runs ({measured_by[label]!r} and "
                    f"{name!r}): calibrate with one of them"
                )
            measured_by[label] = name
        try:
            parts.append(calibration_from_meta(rows, verdicts))
        except ValueError as exc:
            raise RunError(f"meta-eval run {name!r} cannot calibrate a panel: {exc}") from None
    return merge_calibrations(parts)
