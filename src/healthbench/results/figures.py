"""A stored eval run's figures as `healthbench results NAME` prints them, remembered in the store.

`RunFigures` holds what the command shows and writes without a scoring file flag: the summary
(`healthbench.results.summary.Summary`), the numbers of the metrics document (`RunScore.metrics()`)
and how many (conversation, repeat) pairs have no answer yet. They are computed by the one scoring
path (`RunView.score`, or `RunView.score_samples` when the samples are read anyway) and remembered
in table ``run_results`` under a key (`figures_key`): the sha256 of everything they were computed
from, i.e. the run's record (id, name, creation time, stored settings), its revision (bumped in the
transaction of every write of its samples or grades: a resume, a regrade, an import, a correction),
the bootstrap seed and size asked for, the figures' format and healthbench's version. A remembered
body is served only under the same key, so figures of another revision or other options are never
shown; otherwise the run is scored and its figures remembered again (`run_figures`).

Reading them back needs no numpy and no pydantic (docs/benchmarks.md: `results NAME` start-up): this
module imports the scoring core only to score.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from healthbench import __version__
from healthbench.errors import StoreError
from healthbench.results.metrics_out import json_safe
from healthbench.results.summary import Summary, summary_of

if TYPE_CHECKING:
    from healthbench.results.views import RunView
    from healthbench.scoring.run_score import RunScore

FIGURES = "figures"  # the name of the remembered result in ``run_results``
# bump when what `RunFigures` holds, or how any of its numbers is computed, changes within a version
FIGURES_FORMAT = 1


@dataclass(frozen=True)
class RunFigures:
    """What `healthbench results NAME` prints and writes of a run (module doc)."""

    summary: Summary
    metrics: dict[str, Any]  # `RunScore.metrics()`, non-finite floats as None (`json_safe`)
    unanswered: tuple[int, int]  # (pairs without an answer, pairs): `RunView.unanswered`

    @classmethod
    def of(cls, score: RunScore, unanswered: tuple[int, int]) -> RunFigures:
        return cls(summary_of(score), dict(json_safe(score.metrics())), unanswered)

    def dumps(self) -> str:
        """The figures as JSON text (Python's: NaN kept, floats exact, keys in order)."""
        body = {"summary": self.summary.to_json(), "metrics": self.metrics, "unanswered": self.unanswered}
        return json.dumps(body, default=_plain)

    @classmethod
    def loads(cls, text: str) -> RunFigures:
        body = json.loads(text)
        missing, expected = body["unanswered"]
        return cls(Summary.from_json(body["summary"]), body["metrics"], (int(missing), int(expected)))


def figures_key(view: RunView, *, seed: int | None = None, n_resamples: int | None = None) -> str:
    """The key of the run's figures scored with ``seed`` and ``n_resamples`` (None: the stored ones),
    as of now: read before scoring, so that a write made while scoring changes the revision and
    the figures remembered under this key are never served for it."""
    scoring = view.record.config["run"].get("scoring") or {}
    parts = {
        "format": FIGURES_FORMAT,
        "healthbench": __version__,
        "run": [view.record.id, view.record.name, view.record.created_at],
        "config": view.record.config,
        "revision": view.store.revision(view.record.id),
        # an override equal to the stored setting is the stored setting
        "seed": scoring.get("seed") if seed is None else seed,
        "n_resamples": scoring.get("n_resamples") if n_resamples is None else n_resamples,
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def remembered(view: RunView, key: str) -> RunFigures | None:
    """The run's figures remembered under ``key`` (None: none, or computed from something else)."""
    body = view.store.run_result(view.record.id, FIGURES, key)
    return RunFigures.loads(body) if body is not None else None


def remember(view: RunView, key: str, score: RunScore) -> RunFigures:
    """The figures of ``score`` (the run scored with the options of ``key``), remembered under
    ``key``; a store that cannot be written (a read-only file) keeps nothing: the figures are
    still shown, and computed again next time."""
    figures = RunFigures.of(score, view.unanswered())
    with contextlib.suppress(StoreError):
        view.store.set_run_result(view.record.id, FIGURES, key, figures.dumps())
    return figures


def run_figures(view: RunView, *, seed: int | None = None, n_resamples: int | None = None) -> RunFigures:
    """The run's figures: remembered ones when their key matches, else scored (`RunView.score`)
    and remembered."""
    key = figures_key(view, seed=seed, n_resamples=n_resamples)
    figures = remembered(view, key)
    if figures is None:
        figures = remember(view, key, view.score(view.scoring_options(seed=seed, n_resamples=n_resamples)))
    return figures


def _plain(value: Any) -> Any:
    """A numpy scalar among the figures as the Python number it prints as (``json`` takes numpy
    floats, which are floats, but not numpy integers)."""
    item = getattr(value, "item", None)
    if item is None:
        raise TypeError(f"{type(value).__name__} is not a figure")
    return item()
