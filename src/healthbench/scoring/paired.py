"""Paired comparison of two runs on the same conversations: difference of means, paired bootstrap CI
and a two-sided p-value.

Each run's score is its mean clipped to [0, 1], as simple-evals clips every mean (``mean_a``,
``mean_b``). The test is on the *unclipped* conversation means: the statistic is ``d = mean(b) -
mean(a)`` and a resample draws ``n`` conversation indices uniformly with replacement and takes *the
same indices* from both runs, so the CI reflects the pairing (a conversation that is hard for both runs
moves both means together: the one bootstrap of `healthbench.scoring.bootstrap`, both runs' values
as two figures over the same counts). Clipping the resampled
means would tie many of them at 0 or 1 (two runs both below 0 would differ by exactly 0), so it is not
done; ``clipped`` says whether clipping binds on the key (a run's mean, or any resampled mean, outside
[0, 1]), in which case the difference of the reported (clipped) scores is not ``difference``. The CI is
the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` percentiles of the resampled differences,
taken as order statistics (`order_statistic_ci`); the p-value is the two-sided percentile-bootstrap
p-value ``min(1, 2 * min(P*(d <= 0), P*(d >= 0)))``, so ``p < 1 - confidence`` exactly when the CI
excludes 0. Randomness comes only from ``seed``.

``p_t`` is the paired t-test's two-sided p-value on the same differences (Student's t, n - 1 degrees
of freedom): the p-value that Holm's adjustment across a table's rows uses, because its first step
compares the smallest p with alpha / m, far in the tail where the percentile bootstrap's p-values are
too small (too few resamples there, and a plug-in spread: a family-wise error of 6-8% at 0.05 in
simulation, against 5% with ``p_t``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
import numpy.typing as npt

from healthbench.scoring.bootstrap import resample_means
from healthbench.scoring.stats import BootstrapOptions, clipped_mean

__all__ = [
    "BETTER",
    "NO_DIFFERENCE",
    "WORSE",
    "PairedDifference",
    "order_statistic_ci",
    "paired_bootstrap",
    "paired_resample_means",
    "paired_t_p",
    "significance_level",
    "student_t_two_sided",
    "two_sided_p",
    "verdict",
]

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PairedDifference:
    """``b`` against ``a`` on ``n`` paired values: ``mean_a``, ``mean_b`` the clipped means (scores),
    ``difference`` the difference of the unclipped means, which the CI and p-value are about;
    ``clipped``: clipping binds (module doc)."""

    n: int
    mean_a: float
    mean_b: float
    difference: float
    ci_lower: float
    ci_upper: float
    p_value: float
    p_t: float  # the paired t-test's two-sided p (`paired_t_p`): what Holm adjusts across rows
    clipped: bool = False


def paired_resample_means(
    a: npt.ArrayLike, b: npt.ArrayLike, *, n_resamples: int, seed: int
) -> tuple[Floats, Floats]:
    """The unclipped means of ``a`` and of ``b`` over ``n_resamples`` paired resamples: each resample
    draws ``n`` conversations uniformly with replacement and reads both arrays at them (the one
    bootstrap, `healthbench.scoring.bootstrap.resample_means`, seeded by ``seed``)."""
    first, second = _pair(a, b)
    pairs = np.column_stack([first, second])
    means = resample_means(pairs, np.ones_like(pairs), n_resamples, np.random.default_rng(seed))
    return means[:, 0], means[:, 1]


def paired_bootstrap(
    a: npt.ArrayLike, b: npt.ArrayLike, options: BootstrapOptions | None = None
) -> PairedDifference:
    """``b`` minus ``a`` on paired values (module doc), bootstrapped as ``options`` says (resamples,
    seed, CI level; default `BootstrapOptions()`); NaN CI and p-value with no resample."""
    options = options or BootstrapOptions()
    n_resamples, confidence = options.n_resamples, options.confidence
    first, second = _pair(a, b)
    mean_a, mean_b = clipped_mean(first), clipped_mean(second)
    difference = float(np.mean(second) - np.mean(first))
    binds = _outside_unit(np.array([np.mean(first), np.mean(second)]))
    if n_resamples == 0:
        nan = float("nan")
        p_t = paired_t_p(second - first)
        return PairedDifference(first.size, mean_a, mean_b, difference, nan, nan, nan, p_t, binds)
    means_a, means_b = paired_resample_means(first, second, n_resamples=n_resamples, seed=options.seed)
    differences = means_b - means_a
    lower, upper = order_statistic_ci(differences, confidence)
    return PairedDifference(
        n=first.size,
        mean_a=mean_a,
        mean_b=mean_b,
        difference=difference,
        ci_lower=float(lower),
        ci_upper=float(upper),
        p_value=two_sided_p(differences),
        p_t=paired_t_p(second - first),
        clipped=binds or _outside_unit(means_a) or _outside_unit(means_b),
    )


def order_statistic_ci(differences: Floats, confidence: float) -> tuple[float, float]:
    """The percentile CI as order statistics: with ``k = ceil(B (1 - confidence) / 2)`` of ``B``
    resampled differences, the k-th smallest and the k-th largest. Then ``lower > 0`` exactly when
    fewer than ``B (1 - confidence) / 2`` differences are ``<= 0``, and likewise above, so the CI
    excludes 0 exactly when `two_sided_p` is below ``1 - confidence``."""
    ordered = np.sort(differences)
    k = max(1, math.ceil(ordered.size * (1.0 - confidence) / 2.0 - 1e-9))
    return float(ordered[k - 1]), float(ordered[ordered.size - k])


def _outside_unit(values: Floats) -> bool:
    return bool(np.any((values < 0.0) | (values > 1.0)))


def two_sided_p(differences: Floats) -> float:
    """The two-sided percentile-bootstrap p-value of "no difference" from resampled differences."""
    below = float(np.mean(differences <= 0.0))
    above = float(np.mean(differences >= 0.0))
    return min(1.0, 2.0 * min(below, above))


def paired_t_p(differences: Floats) -> float:
    """The paired t-test's two-sided p-value of "mean difference 0" from the n per-conversation
    differences: ``t = mean / (sd / sqrt(n))`` (sd with ddof 1) against Student's t with n - 1 degrees
    of freedom (`student_t_two_sided`); 1 when every difference is 0, 0 when all are one non-zero
    value; NaN for one conversation."""
    n = differences.size
    mean = float(np.mean(differences))
    if n < 2:
        return float("nan")
    sd = float(np.std(differences, ddof=1))
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    return student_t_two_sided(mean / (sd / math.sqrt(n)), n - 1)


def student_t_two_sided(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` (a whole number >= 1) degrees of freedom: 1 - A(t|df)
    in the finite series of Abramowitz & Stegun 26.7.3 (df odd) and 26.7.4 (df even), with
    theta = atan(|t| / sqrt(df)); exact up to rounding."""
    theta = math.atan(abs(t) / math.sqrt(df))
    sin, cos2 = math.sin(theta), math.cos(theta) ** 2
    term = total = 1.0
    if df % 2 == 0:  # A = sin(theta) (1 + 1/2 cos^2 + 1·3/(2·4) cos^4 + ... up to cos^(df-2))
        for k in range(2, df, 2):
            term *= cos2 * (k - 1) / k
            total += term
        inside = sin * total
    else:  # A = 2/pi (theta + sin cos (1 + 2/3 cos^2 + 2·4/(3·5) cos^4 + ... up to cos^(df-3)))
        for k in range(2, df - 1, 2):
            term *= cos2 * k / (k + 1)
            total += term
        inside = 2 / math.pi * (theta + (sin * math.sqrt(cos2) * total if df > 1 else 0.0))
    return min(1.0, max(0.0, 1.0 - inside))


def _pair(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[Floats, Floats]:
    first = np.asarray(a, dtype=np.float64)
    second = np.asarray(b, dtype=np.float64)
    if first.ndim != 1 or first.shape != second.shape:
        raise ValueError(
            f"paired values need two 1-d arrays of one length, got {first.shape} and {second.shape}"
        )
    if first.size == 0:
        raise ValueError("cannot compare runs on no common conversation")
    return first, second


BETTER, WORSE, NO_DIFFERENCE = "better", "worse", "no difference"


def significance_level(confidence: float) -> float:
    """``1 - confidence`` as the decimal it is written as (0.95 gives 0.05 exactly, where the float
    subtraction gives 0.050000000000000044 and would let a p of exactly 0.05 through ``p < alpha``)."""
    return float(Decimal(1) - Decimal(repr(confidence)))


def verdict(
    result: PairedDifference, margin: float = 0.0, *, p_value: float | None = None, alpha: float = 0.05
) -> str:
    """``better`` when b beats a by more than ``margin`` and the CI lies above 0, ``worse`` when b
    trails a by more than ``margin`` and the CI lies below 0, else ``no difference``.

    With ``p_value`` (an adjusted p-value, e.g. Holm's across a table's keys), "the CI lies above /
    below 0" becomes "``p_value < alpha``" (the difference's sign gives the direction)."""
    if margin < 0:
        raise ValueError(f"the margin must be at least 0, got {margin}")
    if p_value is None:
        above, below = result.ci_lower > 0, result.ci_upper < 0
    else:
        above = below = p_value < alpha
    if result.difference > margin and above:
        return BETTER
    if result.difference < -margin and below:
        return WORSE
    return NO_DIFFERENCE
