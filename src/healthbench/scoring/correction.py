"""Judge-error-corrected scores: a run's verdicts corrected for the judge's measured misclassification.

The meta-eval gives, per rubric category, how often the judge says "met" when physicians say met
(sensitivity, Se) and "not met" when they say not met (specificity, Sp). Rogan–Gladen turns an observed
met rate p into the true rate (p + Sp − 1) / (Se + Sp − 1). Applied criterion by criterion, each
verdict v ∈ {0, 1} becomes (v − (1 − Sp)) / (Se + Sp − 1): unbiased for the criterion's true status
given Se and Sp, and, summed over a category's criteria, exactly Rogan–Gladen on that category's met
rate. Scores are linear in the verdicts, so the corrected conversation score, theme and axis scores are
the usual ratios with those corrected values in place of 0/1 (a conversation's value is not clipped;
each run figure is the clipped mean, as for raw scores).

Which Se/Sp a criterion uses: its ``cluster:`` category's, when the meta-eval has at least
``min_rows`` rows with truth "met" and as many with "not met" in it, the CI of J = Se + Sp − 1
excludes 0 (`youden_interval`: the judge is measurably better than chance, not just by its point
estimate) and Se + Sp > 1 + ``epsilon``; otherwise the estimate pooled over every meta-eval row (the
documented fallback; `pooled_uses` names each such run category, why, and the share of the run's
criteria and points it covers). If the pooled estimate itself fails those tests there is no
corrected score: `CorrectionError` says why.

Uncertainty: each draw resamples the run's conversations (the one bootstrap,
`healthbench.scoring.bootstrap`: a drawn conversation brings all its answers, and a key's per-slot
met and weight rates are the ratios of the drawn sums over the drawn number of the key's answers) and,
from the same seeded generator, the meta-eval rows (with replacement, through the multinomial of
their category × truth × judge cells, which is the same distribution for these statistics),
recomputing Se, Sp and every corrected score per draw; the CI is the percentile interval of the
clipped means. A draw where a Se + Sp that a key uses falls to 1 + epsilon or below makes *that
key's* CI undefined (reported as unstable), never silently dropped; keys whose rates stayed stable in
every draw keep their CI.

Truth is the physicians' majority on a row; ties and rows the judge left ungraded are left out.
Everything here is pure: arrays in, numbers out, randomness from the seed argument.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from healthbench.defaults import DEFAULT_CONFIDENCE
from healthbench.scoring.bootstrap import percentile_ci, resample_means
from healthbench.scoring.rubric import Scored, Verdict, key_members
from healthbench.scoring.stats import BootstrapOptions, clip_unit

DEFAULT_MIN_ROWS = 30  # meta-eval rows per truth value (met / not met) for a category's own estimate
DEFAULT_EPSILON = 0.05  # Se + Sp must exceed 1 + epsilon (else the judge is too close to chance)
POOLED = "pooled"
UNTAGGED = "(no cluster: tag)"  # the run criteria without a category (level:example ones)


def criterion_category(tags: Sequence[str]) -> str | None:
    """The meta-eval category of a run criterion: its first ``cluster:`` tag, None when it has none."""
    return next((tag for tag in tags if tag.startswith("cluster:")), None)


NOT_IN_META_EVAL = "not in the meta-eval"
JUDGE_CONFIDENCE = DEFAULT_CONFIDENCE  # the level of the CI of J = Se + Sp - 1 that must exclude 0

FloatArray = npt.NDArray[np.float64]


class CorrectionError(ValueError):
    """The correction is undefined or unstable for these inputs; the message says why."""


@dataclass(frozen=True)
class JudgeCells:
    """Meta-eval rows counted per category and cell: columns tp, fn, tn, fp (truth × judge)."""

    categories: tuple[str, ...]
    counts: npt.NDArray[np.int64]  # (categories, 4)
    dropped_rows: int = 0  # ties among physicians or ungraded by the judge

    @property
    def pooled(self) -> npt.NDArray[np.int64]:
        return np.asarray(self.counts.sum(axis=0), dtype=np.int64)


def judge_cells(
    categories: Sequence[str], physician_labels: Sequence[Sequence[bool]], judge: Sequence[bool | None]
) -> JudgeCells:
    """Count meta-eval rows by category and (truth = physicians' majority, judge) cell."""
    if not len(categories) == len(physician_labels) == len(judge):
        raise ValueError("categories, physician labels and judge labels differ in length")
    names = sorted(set(categories))
    index = {name: i for i, name in enumerate(names)}
    counts = np.zeros((len(names), 4), dtype=np.int64)
    dropped = 0
    for category, labels, verdict in zip(categories, physician_labels, judge, strict=True):
        positive = sum(labels)
        if verdict is None or 2 * positive == len(labels):
            dropped += 1
            continue
        truth = 2 * positive > len(labels)
        cell = (0 if verdict else 1) if truth else (2 if not verdict else 3)
        counts[index[category], cell] += 1
    return JudgeCells(tuple(names), counts, dropped)


def rates(counts: npt.NDArray[np.int64] | FloatArray) -> tuple[FloatArray, FloatArray]:
    """Sensitivity tp / (tp + fn) and specificity tn / (tn + fp) along the last axis (NaN if no row)."""
    c = np.asarray(counts, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return c[..., 0] / (c[..., 0] + c[..., 1]), c[..., 2] / (c[..., 2] + c[..., 3])


@dataclass(frozen=True)
class ErrorModel:
    """Which Se/Sp each criterion uses: ``used`` categories their own, every other one the pooled."""

    used: tuple[str, ...]  # categories with their own estimate, in `JudgeCells.categories` order
    fallback: tuple[tuple[str, str], ...]  # (category, why it falls back to the pooled estimate)
    sensitivity: dict[str, float]  # per used category and POOLED
    specificity: dict[str, float]

    def slot(self, category: str | None) -> int:
        """The parameter column of a criterion: its category's if used, else the pooled one (last)."""
        if category is not None and category in self.used:
            return self.used.index(category)
        return len(self.used)


def error_model(
    cells: JudgeCells, *, min_rows: int = DEFAULT_MIN_ROWS, epsilon: float = DEFAULT_EPSILON
) -> ErrorModel:
    """Choose per-category or pooled estimates; `CorrectionError` if even the pooled one is unusable."""
    pooled = cells.pooled
    why = _unusable(pooled, min_rows, epsilon)
    if why is not None:
        raise CorrectionError(f"no corrected score: over all {int(pooled.sum())} meta-eval rows, {why}")
    se, sp = rates(cells.counts)
    used: list[str] = []
    fallback: list[tuple[str, str]] = []
    for k, name in enumerate(cells.categories):
        reason = _unusable(cells.counts[k], min_rows, epsilon)
        if reason is None:
            used.append(name)
        else:
            fallback.append((name, reason))
    pooled_se, pooled_sp = rates(pooled)
    sensitivity = {name: float(se[cells.categories.index(name)]) for name in used}
    specificity = {name: float(sp[cells.categories.index(name)]) for name in used}
    sensitivity[POOLED], specificity[POOLED] = float(pooled_se), float(pooled_sp)
    return ErrorModel(tuple(used), tuple(fallback), sensitivity, specificity)


def _unusable(counts: npt.NDArray[np.int64], min_rows: int, epsilon: float) -> str | None:
    positives, negatives = int(counts[0] + counts[1]), int(counts[2] + counts[3])
    if positives < min_rows or negatives < min_rows:
        return f"too few rows ({positives} met, {negatives} not met by physicians; {min_rows} of each needed)"
    se, sp = rates(counts)
    _, lower, upper = youden_interval(counts)
    if lower <= 0:
        return (
            f"the {JUDGE_CONFIDENCE:.0%} CI of sensitivity + specificity - 1 is [{lower:.3f}, {upper:.3f}], "
            "which does not exclude 0: the judge is not measurably better than chance, too close to "
            "chance to be corrected"
        )
    if float(se + sp) <= 1 + epsilon:
        return (
            f"sensitivity + specificity = {float(se + sp):.3f} <= 1 + {epsilon:g}: the judge is too close "
            "to chance to be corrected"
        )
    return None


def youden_interval(
    counts: npt.NDArray[np.int64], confidence: float = JUDGE_CONFIDENCE
) -> tuple[float, float, float]:
    """J = Se + Sp − 1 and its Agresti–Caffo CI from one category's (tp, fn, tn, fp) counts.

    J is the difference of two independent proportions, P(judge met | truth met) = tp / (tp + fn)
    minus P(judge met | truth not met) = fp / (tn + fp). Agresti–Caffo adds one "met" and one "not
    met" verdict to each group: p1 = (tp + 1) / (n1 + 2), p2 = (fp + 1) / (n2 + 2), and the interval is
    p1 − p2 ± z √(p1 (1 − p1) / (n1 + 2) + p2 (1 − p2) / (n2 + 2)), z the normal quantile of
    (1 + confidence) / 2 (1.96 at 95%)."""
    tp, fn, tn, fp = (float(c) for c in counts)
    n1, n2 = tp + fn, tn + fp
    j = tp / n1 + tn / n2 - 1 if n1 and n2 else float("nan")
    p1, p2 = (tp + 1) / (n1 + 2), (fp + 1) / (n2 + 2)
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    half = z * math.sqrt(p1 * (1 - p1) / (n1 + 2) + p2 * (1 - p2) / (n2 + 2))
    return j, p1 - p2 - half, p1 - p2 + half


@dataclass(frozen=True)
class PooledUse:
    """Run criteria of one category scored with the pooled rates: why, and what share of the run's
    criteria (count) and points (Σ|points|) they are, over its graded conversations."""

    category: str  # a ``cluster:`` tag, or `UNTAGGED`
    reason: str
    n_criteria: int
    criteria_share: float
    points_share: float


def pooled_uses(conversations: Sequence[Scored], model: ErrorModel) -> tuple[PooledUse, ...]:
    """Every category of the run's criteria that uses the pooled rates, largest points share first:
    untagged criteria, categories absent from the meta-eval, and `ErrorModel.fallback` ones."""
    why = dict(model.fallback)
    count: dict[str, int] = {}
    points: dict[str, float] = {}
    total_points = 0.0
    total = 0
    for conversation in conversations:
        for item in conversation.rubrics:
            category = criterion_category(item.tags) or UNTAGGED
            total += 1
            total_points += abs(item.points)
            if category in model.used:
                continue
            count[category] = count.get(category, 0) + 1
            points[category] = points.get(category, 0.0) + abs(item.points)
    out = [
        PooledUse(
            category,
            "untagged criteria always use them"
            if category == UNTAGGED
            else why.get(category, NOT_IN_META_EVAL),
            n,
            n / total,
            points[category] / total_points if total_points else 0.0,
        )
        for category, n in count.items()
    ]
    return tuple(sorted(out, key=lambda u: (-u.points_share, u.category)))


@dataclass(frozen=True)
class KeyTable:
    """One key's conversations and, per conversation and parameter slot, the sums the score needs:
    ``met`` = Σ weight · verdict and ``weight`` = Σ weight, weight = points / the key's positive points."""

    rows: npt.NDArray[np.intp]  # positions among the graded conversations
    met: FloatArray  # (len(rows), slots)
    weight: FloatArray


def key_tables(
    conversations: Sequence[Scored], verdicts: Sequence[Sequence[Verdict]], model: ErrorModel
) -> dict[str, KeyTable]:
    """Per key (overall, example tags, rubric tags with positive points: `key_members`), its
    `KeyTable`. Conversations with an ungraded criterion are left out, as in the raw scores."""
    slots = len(model.used) + 1
    rubrics = [item for conversation in conversations for item in conversation.rubrics]
    slot = np.array([model.slot(criterion_category(i.tags)) for i in rubrics])
    points = np.array([item.points for item in rubrics], dtype=np.float64)
    met = np.array([v is Verdict.MET for v in chain.from_iterable(verdicts)], dtype=bool)
    tables = {}
    for key, members in key_members(conversations, verdicts).items():
        weight = points[members.criterion] / members.possible[members.row]  # summed in criterion order
        cell = members.row * slots + slot[members.criterion]
        tables[key] = KeyTable(
            members.rows,
            _slot_sums(cell, np.where(met[members.criterion], weight, 0.0), members.rows.size, slots),
            _slot_sums(cell, weight, members.rows.size, slots),
        )
    return tables


def _slot_sums(cell: npt.NDArray[np.intp], values: FloatArray, n_rows: int, slots: int) -> FloatArray:
    """(n_rows, slots) sums of ``values`` by (row, slot) ``cell``, added in order."""
    sums = np.bincount(cell, values, n_rows * slots).astype(np.float64, copy=False)
    return sums.reshape(n_rows, slots)


@dataclass(frozen=True)
class CorrectedKey:
    """A key's raw and corrected run figures (clipped means) and the corrected percentile CI."""

    raw: float
    corrected: float
    ci_lower: float | None  # None: no bootstrap, or unstable (``unstable_draws`` > 0)
    ci_upper: float | None
    n_samples: int
    unstable_draws: int = 0  # draws where a Se + Sp this key uses fell to 1 + epsilon or below


@dataclass(frozen=True)
class CorrectionResult:
    keys: dict[str, CorrectedKey]
    model: ErrorModel
    cells: JudgeCells
    n_resamples: int
    unstable_draws: int  # bootstrap draws where a Se + Sp some key uses fell to 1 + epsilon or below
    pooled: tuple[PooledUse, ...] = ()  # the run's categories scored with the pooled rates

    @property
    def unstable_keys(self) -> tuple[str, ...]:
        """Keys without a CI because their rates were unstable in some draw."""
        return tuple(key for key, value in self.keys.items() if value.unstable_draws)

    def metrics(self) -> dict[str, float | int | None]:
        """Flat keys (documented in docs/metrics.md and docs/correction.md)."""
        flat: dict[str, float | int | None] = {}
        for key, value in self.keys.items():
            flat[f"corrected:{key}"] = value.corrected
            flat[f"corrected:{key}:ci_lower"] = value.ci_lower
            flat[f"corrected:{key}:ci_upper"] = value.ci_upper
            flat[f"corrected:{key}:n_samples"] = value.n_samples
        for name in (*self.model.used, POOLED):
            flat[f"judge_sensitivity:{name}"] = self.model.sensitivity[name]
            flat[f"judge_specificity:{name}"] = self.model.specificity[name]
        flat["corrected:unstable_draws"] = self.unstable_draws
        for use in self.pooled:
            flat[f"corrected:pooled_rates:{use.category}:criteria_share"] = use.criteria_share
            flat[f"corrected:pooled_rates:{use.category}:points_share"] = use.points_share
        return flat


def correct(
    tables: dict[str, KeyTable],
    n_conversations: int,
    cells: JudgeCells,
    model: ErrorModel,
    *,
    options: BootstrapOptions | None = None,
    epsilon: float = DEFAULT_EPSILON,
    clusters: npt.NDArray[np.intp] | None = None,
) -> CorrectionResult:
    """Raw and corrected figures for every key, with the joint bootstrap CI (see the module doc) of
    ``options`` (resamples, seed, CI level; default `BootstrapOptions()`); ``clusters`` gives each
    of the ``n_conversations`` graded answers its conversation (0, 1, ...: `conversation_clusters`)
    when some have several, to draw conversations rather than answers."""
    options = options or BootstrapOptions()
    se_point, sp_point = _parameters(model)
    rng = np.random.default_rng(options.seed)
    slots = {key: np.flatnonzero(t.weight.any(axis=0) | t.met.any(axis=0)) for key, t in tables.items()}
    means = _resample_rates(tables, slots, n_conversations, clusters, options.n_resamples, rng)
    bad = np.zeros((0, len(se_point)), dtype=bool)
    if options.n_resamples > 0:
        se_draw, sp_draw = _parameter_draws(cells, model, options.n_resamples, rng)
        bad = ~((se_draw + sp_draw) > 1 + epsilon)  # NaN (a cell without rows) counts as unstable
    keys: dict[str, CorrectedKey] = {}
    unstable_any = np.zeros(bad.shape[0], dtype=bool)
    for key, table in tables.items():
        met, weight, n = table.met.sum(0), table.weight.sum(0), len(table.rows)
        raw = _clip(_corrected_means(met, weight, n, np.ones_like(se_point), np.ones_like(sp_point)))
        corrected = _clip(_corrected_means(met, weight, n, se_point, sp_point))
        lower = upper = None
        cols = slots[key]
        key_bad = bad[:, cols].any(axis=1)
        unstable_any |= key_bad
        key_unstable = int(np.count_nonzero(key_bad))
        if options.n_resamples > 0 and key_unstable == 0:
            met_rate, weight_rate = means[key]
            drawn = clip_unit(_corrected_means(met_rate, weight_rate, 1, se_draw[:, cols], sp_draw[:, cols]))
            if np.isfinite(drawn).any():
                low, high = percentile_ci(drawn[:, None], options.confidence)
                lower, upper = float(low[0]), float(high[0])
        keys[key] = CorrectedKey(raw, corrected, lower, upper, n, key_unstable)
    return CorrectionResult(keys, model, cells, options.n_resamples, int(np.count_nonzero(unstable_any)))


def _resample_rates(
    tables: dict[str, KeyTable],
    slots: dict[str, npt.NDArray[np.intp]],
    n_answers: int,
    clusters: npt.NDArray[np.intp] | None,
    n_resamples: int,
    rng: np.random.Generator,
) -> dict[str, tuple[FloatArray, FloatArray]]:
    """Per key, the resample means (one bootstrap for every key: `resample_means`) of its met and
    weight sums in each of its slots, (n_resamples, slots) each: per conversation drawn, the sums
    of its answers' values over the number of its answers in the key."""
    n_units = n_answers if clusters is None else int(clusters.max()) + 1
    sums: list[FloatArray] = []
    counts: list[FloatArray] = []
    for key, table in tables.items():
        units = table.rows if clusters is None else clusters[table.rows]
        for column in (*table.met[:, slots[key]].T, *table.weight[:, slots[key]].T):
            sums.append(np.asarray(np.bincount(units, weights=column, minlength=n_units), dtype=np.float64))
            counts.append(np.bincount(units, minlength=n_units).astype(np.float64))
    if n_resamples == 0 or not sums:
        return {}
    means = resample_means(np.column_stack(sums), np.column_stack(counts), n_resamples, rng)
    out: dict[str, tuple[FloatArray, FloatArray]] = {}
    start = 0
    for key in tables:
        width = slots[key].size
        out[key] = means[:, start : start + width], means[:, start + width : start + 2 * width]
        start += 2 * width
    return out


def _parameters(model: ErrorModel) -> tuple[FloatArray, FloatArray]:
    names = [*model.used, POOLED]
    return (
        np.array([model.sensitivity[n] for n in names]),
        np.array([model.specificity[n] for n in names]),
    )


def _parameter_draws(
    cells: JudgeCells, model: ErrorModel, n: int, rng: np.random.Generator
) -> tuple[FloatArray, FloatArray]:
    """Se and Sp of every parameter slot for ``n`` bootstrap draws of the meta-eval rows."""
    total = int(cells.counts.sum())
    flat = cells.counts.reshape(-1).astype(np.float64)
    drawn = rng.multinomial(total, flat / total, n).reshape(n, *cells.counts.shape)
    used = [cells.categories.index(name) for name in model.used]
    slots = np.concatenate([drawn[:, used, :], drawn.sum(axis=1, keepdims=True)], axis=1)
    return rates(slots)


def _corrected_means(
    met: FloatArray, weight: FloatArray, n: FloatArray | int, se: FloatArray, sp: FloatArray
) -> FloatArray:
    """Σ_slots (met − weight · (1 − Sp)) / (Se + Sp − 1), divided by the number of conversations."""
    with np.errstate(invalid="ignore", divide="ignore"):
        total = ((met - weight * (1 - sp)) / (se + sp - 1)).sum(axis=-1)
        return np.asarray(total / n, dtype=np.float64)


def _clip(value: float | FloatArray) -> float:
    return float(clip_unit(value))
