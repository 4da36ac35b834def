"""The one bootstrap of every figure: resample conversations, as seeded counts times values.

A figure (a run's score, a tag's, an axis', a worst-at-k point, a corrected score, one side of a
paired difference) is a mean over answers of some conversations. In a call's space of C
conversations, conversation c holds n_c of the figure's answers, whose values add up to s_c
(n_c = 1 and s_c its value with one answer per conversation; n_c = 0 for a conversation the figure
does not cover). One resample draws C conversations uniformly with replacement; w_c is how often it
draws conversation c, so (w_1, ..., w_C) ~ Multinomial(C; 1/C, ..., 1/C), and a drawn conversation
brings all its answers. The resample mean is

    m* = sum_c w_c s_c / sum_c w_c n_c

- one answer per conversation, all covered: sum_c w_c v_c / C, simple-evals' resample of the values;
- several answers of a conversation (repeats, a row's reference completions, runs pooled as
  repeats): the cluster bootstrap, a conversation's answers kept together;
- a figure over some of the conversations (a theme, an axis, the conversations with at least k
  answers): the mean over the drawn conversations it covers; a resample that draws none of them has
  no mean (NaN) and is left out of that figure's std and CI;
- a paired difference (run B minus run A on the same conversations): m*_B - m*_A over the same w.

B resamples are the rows of a count matrix W (B x C), so the resample means of K figures are
``(W @ S) / (W @ N)`` with S and N the C x K matrices of their sums s_c and counts n_c: two matrix
products over conversations, whatever the figures. A row of W is the bincount of C uniform integers
in [0, C) from the caller's seeded `numpy.random.Generator` (the multinomial above), drawn
`BLOCK_DRAWS` // C rows at a time (this bounds memory and is part of the stream's definition): the
same seed, C and B give the same W, so figures over the same conversations share their draws and
every CI is reproducible.

From the B resample means of a figure (each clipped to [0, 1] as simple-evals clips every mean, except
in paired differences): the bootstrap std is their population std and the percentile CI their
(1 - confidence) / 2 and (1 + confidence) / 2 quantiles (numpy's linear interpolation).
"""

from __future__ import annotations

import warnings

import numpy as np
import numpy.typing as npt

__all__ = ["BLOCK_DRAWS", "Floats", "nan_std", "percentile_ci", "resample_counts", "resample_means"]

Floats = npt.NDArray[np.float64]

BLOCK_DRAWS = 1 << 20  # conversation draws per block of resamples (about 8 MB of counts)


def resample_counts(n_conversations: int, n_resamples: int, rng: np.random.Generator) -> Floats:
    """(n_resamples, C) counts w: row b says how often resample b draws each of C conversations,
    from C uniform draws with replacement (Multinomial(C; 1/C each))."""
    c = n_conversations
    draws = rng.integers(0, c, size=(n_resamples, c))
    draws += np.arange(0, n_resamples * c, c)[:, None]  # resample b counts into its own C bins
    return np.bincount(draws.ravel(), minlength=n_resamples * c).reshape(n_resamples, c).astype(np.float64)


def resample_means(
    sums: npt.ArrayLike, counts: npt.ArrayLike, n_resamples: int, rng: np.random.Generator
) -> Floats:
    """(n_resamples, K) resample means ``(W @ sums) / (W @ counts)`` of K figures (module doc):
    ``sums`` and ``counts`` are (C, K), per conversation the figure's sum of values and number of
    answers. NaN where a resample draws none of a figure's conversations."""
    s = np.asarray(sums, dtype=np.float64)
    n = np.asarray(counts, dtype=np.float64)
    if s.ndim != 2 or s.shape != n.shape:
        raise ValueError(f"sums and counts must be (conversations, figures) arrays, got {s.shape}, {n.shape}")
    c = s.shape[0]
    out = np.empty((n_resamples, s.shape[1]))
    if c == 0:
        out.fill(np.nan)
        return out
    s_columns, s_of = _distinct_columns(s)  # identical columns: one product, the same bits
    n_columns, n_of = _distinct_columns(n)  # (figures on the same answers share their counts)
    step = max(1, BLOCK_DRAWS // c)
    for start in range(0, n_resamples, step):
        w = resample_counts(c, min(step, n_resamples - start), rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            np.divide((w @ s_columns)[:, s_of], (w @ n_columns)[:, n_of], out=out[start : start + w.shape[0]])
    return out


def _distinct_columns(matrix: Floats) -> tuple[Floats, npt.NDArray[np.intp]]:
    """The distinct columns of ``matrix`` (in first-seen order) and each column's index among them."""
    index: dict[bytes, int] = {}
    of = np.array([index.setdefault(column.tobytes(), len(index)) for column in matrix.T], dtype=np.intp)
    _, firsts = np.unique(of, return_index=True)  # (ids are numbered in first-seen order)
    return matrix[:, firsts], of


def percentile_ci(means: Floats, confidence: float) -> tuple[Floats, Floats]:
    """Per column of ``means`` (resamples, figures): the (1 - confidence) / 2 and (1 + confidence) / 2
    quantiles of its resample means, NaN ones (no conversation of the figure drawn) left out."""
    alpha = (1.0 - confidence) / 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a figure with no finite mean: NaN bounds
        lows, highs = np.nanquantile(means, [alpha, 1.0 - alpha], axis=0)
    return lows, highs


def nan_std(means: Floats) -> Floats:
    """Per column of ``means``: the population std of its resample means, NaN ones left out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(np.nanstd(means, axis=0), dtype=np.float64)
