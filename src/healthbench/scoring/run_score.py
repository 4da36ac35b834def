"""A run's numbers from its graded samples: the one function every result shape is derived from.

`score_run` turns graded samples (conversation + completion + one verdict per criterion) into the
flat simple-evals style metrics (``overall_score``, ``axis:accuracy:n_samples``, ...) plus our
additions (CI bounds, ungraded counts, optional length-adjusted score and consensus error rate).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from healthbench.scoring.rubric import OVERALL, Scored, Verdict, conversation_metrics, length_adjusted
from healthbench.scoring.rubric_columns import Entries, Ints, rubric_entries
from healthbench.scoring.stats import (
    BootstrapOptions,
    KeyStats,
    aggregate_columns,
    conversation_clusters,
    flatten,
)

LENGTH_ADJUSTED = "overall_score_length_adjusted"  # simple-evals' key
ERROR_RATE = "error_rate"


@dataclass(frozen=True)
class GradedSample:
    """One candidate answer to one conversation (one repeat), with a verdict per rubric criterion. The
    conversation is anything `Scored` (read by attribute: scoring never loads the pydantic models)."""

    conversation: Scored
    completion: str
    verdicts: tuple[Verdict, ...]
    explanations: tuple[str | None, ...] = ()
    repeat: int = 0
    prompt_messages: tuple[Mapping[str, str], ...] | None = None
    usage: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if len(self.verdicts) != len(self.conversation.rubrics):
            raise ValueError(
                f"{self.conversation.prompt_id}: {len(self.verdicts)} verdicts for "
                f"{len(self.conversation.rubrics)} criteria"
            )

    @property
    def ungraded(self) -> int:
        return self.verdicts.count(Verdict.UNGRADED)


@dataclass(frozen=True)
class ScoringOptions(BootstrapOptions):
    """How to aggregate: the bootstrap (`BootstrapOptions`: size, seed, CI level, threads) and the
    optional extra keys."""

    length_penalty: float | None = None
    length_center: float | None = None
    error_rate: bool = False


@dataclass(frozen=True)
class RunScore:
    """Per-key aggregates, per-sample metrics (None = left out as ungraded) and ungraded counts."""

    stats: dict[str, KeyStats]
    per_sample: list[dict[str, float] | None]
    ungraded_criteria: int
    ungraded_samples: int
    options: ScoringOptions = field(default_factory=ScoringOptions)

    @property
    def score(self) -> float | None:
        s = self.stats.get(OVERALL)
        return s.mean if s else None

    @property
    def n_samples(self) -> int:
        return len(self.per_sample)

    def metrics(self) -> dict[str, float | int | None]:
        """The flat metrics object written by ``--metrics-out`` (documented in docs/metrics.md)."""
        stats = dict(self.stats)
        score_stats = stats.pop("score", None)
        flat: dict[str, float | int | None] = dict(flatten(stats))
        if score_stats is not None:
            flat.update({k: v for k, v in flatten({"score": score_stats}).items()})
        else:
            flat["score"] = None
        if self.options.error_rate and OVERALL in self.stats:
            overall = self.stats[OVERALL]
            flat[ERROR_RATE] = 1.0 - overall.mean
            flat[f"{ERROR_RATE}:ci_lower"] = 1.0 - overall.ci_upper
            flat[f"{ERROR_RATE}:ci_upper"] = 1.0 - overall.ci_lower
        flat["n_samples"] = self.n_samples
        flat["ungraded_criteria"] = self.ungraded_criteria
        flat["ungraded_samples"] = self.ungraded_samples
        return flat


def sample_metrics(sample: GradedSample, options: ScoringOptions) -> dict[str, float] | None:
    """The per-sample metric values (simple-evals' ``SingleEvalResult.metrics``: `conversation_metrics`,
    plus the length-adjusted score when configured), None if ungraded."""
    metrics = conversation_metrics(sample.conversation, sample.verdicts)
    if metrics is not None and _length_adjustment_on(options):
        assert options.length_penalty is not None and options.length_center is not None
        metrics[LENGTH_ADJUSTED] = length_adjusted(
            metrics[OVERALL],
            len(sample.completion),
            penalty=options.length_penalty,
            center=options.length_center,
        )
    return metrics


def metric_keys(sample: GradedSample, options: ScoringOptions) -> list[str]:
    """The metric keys ``sample`` carries once graded (the same whatever its verdicts): what an
    ungraded sample would have counted towards."""
    placeholder = (Verdict.NOT_MET,) * len(sample.conversation.rubrics)
    keys = list(conversation_metrics(sample.conversation, placeholder) or {})
    if _length_adjustment_on(options):
        keys.append(LENGTH_ADJUSTED)
    return keys


def score_run(samples: Sequence[GradedSample], options: ScoringOptions | None = None) -> RunScore:
    """Score a run: the one entry point from verdicts to figures. Ungraded samples are counted and
    left out; ``score`` mirrors simple-evals.

    Each sample's metrics are `sample_metrics` (computed for all samples at once: `rubric_scores`); the
    aggregate is that of simple-evals' rows (each graded sample's metrics followed by ``score``, the
    overall score again), keys in first-seen order, as columns so that the bootstrap
    (`healthbench.scoring.stats`) shares its draws. Samples of one conversation (by prompt_id:
    repeats) make its CIs conversation-level; the means and ``bootstrap_std`` stay simple-evals'.
    """
    options = options or ScoringOptions()
    adjust = _length_adjustment_on(options)  # (a half-given adjustment is refused even with nothing graded)
    graded = [s for s in samples if Verdict.UNGRADED not in s.verdicts]
    verdicts = np.fromiter(chain.from_iterable(s.verdicts for s in graded), object)
    entries = rubric_scores([s.conversation for s in graded], (verdicts == Verdict.MET).astype(np.float64))
    if adjust:
        assert options.length_penalty is not None and options.length_center is not None
        penalty, center = options.length_penalty, options.length_center
        overall = entries.value[entries.key == 0].tolist()
        adjusted = [
            length_adjusted(score, len(s.completion), penalty=penalty, center=center)
            for score, s in zip(overall, graded, strict=True)
        ]
        entries = entries.then(LENGTH_ADJUSTED, np.array(adjusted, np.float64))
    metrics = iter(_dicts(entries, len(graded)))
    per_sample = [next(metrics) if Verdict.UNGRADED not in s.verdicts else None for s in samples]
    clusters = conversation_clusters([s.conversation.prompt_id for s in graded])
    columns = entries.then("score", entries.value[entries.key == 0]).columns()
    columns = {key: column.in_clusters(clusters) for key, column in columns.items()}
    return RunScore(
        stats=aggregate_columns(columns, len(graded), options=options),
        per_sample=per_sample,
        ungraded_criteria=sum(sample.ungraded for sample in samples),
        ungraded_samples=len(per_sample) - len(graded),
        options=options,
    )


def _length_adjustment_on(options: ScoringOptions) -> bool:
    """Whether `LENGTH_ADJUSTED` is computed: center and penalty given together, both >= 0."""
    penalty, center = options.length_penalty, options.length_center
    if (penalty is None) != (center is None):
        raise ValueError("the length adjustment needs both its center and its penalty per 500 characters")
    if penalty is None or center is None:
        return False
    if penalty < 0 or center < 0:
        raise ValueError("the length adjustment's center and penalty must be >= 0")
    return True


_POINTS, _TAGS, _EXAMPLE_TAGS = map(operator.attrgetter, ("points", "tags", "example_tags"))


class _Numbered(dict[tuple[str, ...], int]):
    """Tag lists numbered 0, 1, ... as first looked up."""

    def __missing__(self, tags: tuple[str, ...]) -> int:
        self[tags] = number = len(self)
        return number


def rubric_scores(conversations: Sequence[Scored], met: npt.NDArray[np.float64]) -> Entries:
    """`conversation_metrics` of graded answers to ``conversations`` (``met``: per criterion of theirs,
    one answer's after another's, 1.0 or 0.0), as `rubric_columns.Entries` (`RubricTable.scores`)."""
    return RubricTable.of(conversations).scores(np.arange(len(conversations)), met)


@dataclass(frozen=True)
class RubricTable:
    """Conversations' rubrics and tags flattened once into arrays of points and key codes for
    `rubric_columns.rubric_entries`; any answers to them are scored by gathering (`scores`): many runs
    of one dataset flatten it once."""

    conversations: Sequence[Scored]
    keys: list[str]  # every tag met, after `OVERALL`
    n_items: Ints  # per conversation, its number of criteria
    starts: Ints  # per conversation, its first criterion
    points: npt.NDArray[np.float64]  # per criterion
    tag_list: Ints  # per criterion, its tag list
    example_list: Ints  # per conversation, its example tags' list
    size: Ints  # per tag list, its number of distinct keys
    flat: Ints  # the lists' key codes, one list after another

    @classmethod
    def of(cls, conversations: Sequence[Scored]) -> RubricTable:
        rubrics = [c.rubrics for c in conversations]
        items = list(chain.from_iterable(rubrics))
        lists = _Numbered()  # the distinct tag lists (criteria's and example tags)
        tags = chain(map(_TAGS, items), map(_EXAMPLE_TAGS, conversations))
        list_of = np.fromiter(map(lists.__getitem__, map(tuple, tags)), np.intp)
        keys = {OVERALL: 0}
        members = [[keys.setdefault(tag, len(keys)) for tag in dict.fromkeys(t)] for t in lists]
        size = np.fromiter(map(len, members), np.intp, len(members))
        n_items = np.fromiter(map(len, rubrics), np.intp, len(rubrics))
        return cls(
            conversations,
            list(keys),
            n_items,
            np.cumsum(n_items) - n_items,
            np.fromiter(map(_POINTS, items), np.float64, len(items)),
            list_of[: len(items)],
            list_of[len(items) :],
            size,
            np.fromiter(chain.from_iterable(members), np.intp, int(size.sum())),
        )

    def scores(self, which: Ints, met: npt.NDArray[np.float64]) -> Entries:
        """The scores of answers to conversations ``which`` (indices into ``conversations``; ``met``: per
        criterion of theirs, one answer's after another's, 1.0 or 0.0)."""
        n_items = self.n_items[which]
        first = np.cumsum(n_items) - n_items  # (each answer's first criterion among theirs)
        criterion = np.arange(int(n_items.sum()), dtype=np.intp) + np.repeat(
            self.starts[which] - first, n_items
        )
        tagged, example = self._pairs(self.tag_list[criterion]), self._pairs(self.example_list[which])
        entries = rubric_entries(self.keys, n_items, self.points[criterion], met, tagged, example)
        unscored = np.flatnonzero(~np.isfinite(entries.value[entries.key == 0]))
        if unscored.size:
            prompt_id = self.conversations[which[unscored[0]]].prompt_id
            raise ValueError(f"conversation {prompt_id} has no positive points")
        return entries

    def _pairs(self, owners: Ints) -> tuple[Ints, Ints]:
        """(owner, key) per key of each owner's tag list (``owners``: each owner's list)."""
        k = self.size[owners]
        start = np.repeat(np.cumsum(self.size)[owners] - np.cumsum(k), k)
        return np.repeat(np.arange(k.size), k), self.flat[np.arange(k.sum(), dtype=np.intp) + start]


def _dicts(entries: Entries, n: int) -> list[dict[str, float]]:
    """Per answer (0 .. n - 1), its scores as a dict, in their order."""
    names, values = [entries.keys[k] for k in entries.key.tolist()], entries.value.tolist()
    ends = np.cumsum(np.bincount(entries.row, minlength=n)).tolist()
    return [dict(zip(names[a:b], values[a:b], strict=True)) for a, b in zip([0, *ends], ends, strict=False)]
