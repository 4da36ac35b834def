"""Run-level statistics: clipped means, bootstrap standard deviations and percentile CIs.

Matches simple-evals: for each key, the mean of the unclipped per-conversation values, clipped to
[0, 1]; the bootstrap std is the population std of ``n_resamples`` resample means, each clipped; the
CI is a pair of percentiles of the same clipped means. Randomness comes only from ``seed``.

How a key is resampled
----------------------
A resample of a key with n values is n draws, uniform and with replacement, from its own values, and
only the sum of the draws matters. Every key's resample sums are drawn *exactly* from that
distribution, by whichever of these equivalent methods the cost model finds cheapest for it:

- gather: draw n uniform indices and add up the values they pick (the definition itself);
- counts: how many of the n draws pick each distinct value is Multinomial(n, multiplicity / n), so a
  resample sum is ``sum(count_j * value_j)``: a 0/1 key (a cluster) costs one binomial per resample
  instead of n lookups. Keys mix both: their frequent values are counted and the other ("tail")
  values are gathered; the tail's share of the n draws is one more multinomial category, and given
  that share its draws are uniform over the tail values, so the mix is exact too;
- frame: keys that take a subset of the rows of one shared column (theme and category keys hold
  the overall score of their conversations) are drawn together. The rows are cut into atoms (rows in
  the same keys); each atom has one stream of uniform draws over its rows. A key's n draws, uniform
  over the union of its atoms, fall into its atoms by Multinomial(n, atom size / n) and are uniform
  within each atom, so the key takes that many draws from the *start* of each atom's stream. Keys on
  every row with another column (``level:example``) reuse the same draws with one more value read.

Keys with identical values share their draws. Draws are therefore correlated *across* keys, but
every key's own resamples are exact i.i.d. bootstrap resamples of its values, which is all the
reported numbers depend on. The plan is chosen by a fixed cost model from the data alone, and each
random stream is a child of ``SeedSequence(seed)`` read by one task in a fixed order, so the numbers
depend only on the inputs and the seed: not on chunk sizes, thread count or machine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DEFAULT_RESAMPLES = 1000
_CHUNK_ELEMENTS = 1 << 17  # draws gathered per pass (cache-sized buffers); the numbers do not depend on it

# Cost per resample (about nanoseconds) of the exact methods. Fixed, so the plan depends on the data only.
_COST_DRAW = 1.9  # gather one value: a uniform index, a lookup and an addition
_COST_COLUMN = 0.5  # read one more column in each frame draw
_COST_BINOMIAL = 60.0  # one binomial split of a multinomial count vector

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class KeyStats:
    """The aggregate of one metric key over a run."""

    mean: float
    n_samples: int
    bootstrap_std: float
    ci_lower: float
    ci_upper: float


@dataclass(frozen=True)
class Column:
    """One key's sample: ``values[i]`` belongs to row ``rows[i]`` (strictly increasing) of a row space
    shared by all keys of a run (its graded conversations). Rows only let keys share draws."""

    rows: npt.NDArray[np.intp]
    values: Floats


def clipped_mean(values: npt.ArrayLike) -> float:
    return float(np.clip(np.mean(np.asarray(values, dtype=np.float64)), 0, 1))


def collect(per_conversation: Iterable[Mapping[str, float]]) -> dict[str, list[float]]:
    """Group values by key, keys in first-seen order (simple-evals' order)."""
    grouped: dict[str, list[float]] = {}
    for metrics in per_conversation:
        for key, value in metrics.items():
            grouped.setdefault(key, []).append(value)
    return grouped


def columns_of(per_conversation: Sequence[Mapping[str, float]]) -> dict[str, Column]:
    """`collect` that also records each value's row (its position in ``per_conversation``)."""
    rows: dict[str, list[int]] = {}
    values: dict[str, list[float]] = {}
    for row, metrics in enumerate(per_conversation):
        for key, value in metrics.items():
            if key not in rows:
                rows[key], values[key] = [], []
            rows[key].append(row)
            values[key].append(value)
    return {key: Column(np.array(rows[key], dtype=np.intp), np.array(values[key], dtype=np.float64))
            for key in rows}


def aggregate(
    per_conversation: Sequence[Mapping[str, float]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    workers: int = 1,
) -> dict[str, KeyStats]:
    """Aggregate per-conversation metrics into `KeyStats` per key (same seed, same bits)."""
    return aggregate_columns(columns_of(per_conversation), len(per_conversation), n_resamples=n_resamples,
                             seed=seed, confidence=confidence, workers=workers)


def aggregate_groups(
    grouped: Mapping[str, Sequence[float]],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    workers: int = 1,
) -> dict[str, KeyStats]:
    """`aggregate` for values already grouped by key (no rows in common: each key on its own rows)."""
    columns: dict[str, Column] = {}
    offset = 0
    for key, values in grouped.items():
        array = np.asarray(values, dtype=np.float64)
        columns[key] = Column(np.arange(offset, offset + array.size, dtype=np.intp), array)
        offset += array.size
    return aggregate_columns(columns, offset, n_resamples=n_resamples, seed=seed, confidence=confidence,
                             workers=workers)


def aggregate_columns(
    columns: Mapping[str, Column],
    n_rows: int,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    workers: int = 1,
) -> dict[str, KeyStats]:
    """`KeyStats` per non-empty key (in the mapping's order) of samples laid out as `Column`s."""
    keys = [key for key, column in columns.items() if column.values.size > 0]
    if not keys:
        return {}
    samples = [columns[key] for key in keys]
    boot = bootstrap_columns(samples, n_rows, n_resamples=n_resamples, seed=seed, workers=workers)
    alpha = (1.0 - confidence) / 2.0
    if n_resamples > 0:
        stds = boot.std(axis=0)
        lows, highs = np.quantile(boot, [alpha, 1.0 - alpha], axis=0)
    else:
        stds = lows = highs = np.full(len(keys), np.nan)
    return {
        key: KeyStats(mean=clipped_mean(column.values), n_samples=int(column.values.size),
                      bootstrap_std=float(stds[i]), ci_lower=float(lows[i]), ci_upper=float(highs[i]))
        for i, (key, column) in enumerate(zip(keys, samples, strict=True))
    }


def bootstrap_means(
    samples: Sequence[npt.ArrayLike], *, n_resamples: int, seed: int, workers: int = 1
) -> Floats:
    """Clipped means of ``n_resamples`` resamples (with replacement) of every sample: shape
    (n_resamples, len(samples)). Samples share no rows; identical samples share their draws."""
    arrays = [np.asarray(s, dtype=np.float64) for s in samples]
    bounds = np.cumsum([0] + [a.size for a in arrays])
    columns = [Column(np.arange(lo, hi, dtype=np.intp), a)
               for lo, hi, a in zip(bounds[:-1], bounds[1:], arrays, strict=True)]
    return bootstrap_columns(columns, int(bounds[-1]), n_resamples=n_resamples, seed=seed, workers=workers)


def bootstrap_columns(
    columns: Sequence[Column], n_rows: int, *, n_resamples: int, seed: int, workers: int = 1
) -> Floats:
    """Clipped resample means, shape (n_resamples, len(columns)), each column resampled exactly.

    ``workers`` threads run the plan's independent samplers; each owns a child of
    ``SeedSequence(seed)``, so the result does not depend on ``workers``.
    """
    if any(c.values.size == 0 for c in columns):
        raise ValueError("cannot bootstrap an empty sample")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    out = np.empty((n_resamples, len(columns)), dtype=np.float64)
    if not columns or n_resamples == 0:
        return out
    samplers = plan(columns, n_rows)
    seeds = np.random.SeedSequence(seed).spawn(len(samplers))

    def run(i: int) -> Floats:
        return samplers[i].sums(n_resamples, np.random.Generator(np.random.SFC64(seeds[i])))

    if workers == 1 or len(samplers) == 1:
        results = [run(i) for i in range(len(samplers))]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bootstrap") as pool:
            results = list(pool.map(run, range(len(samplers))))
    for sampler, sums in zip(samplers, results, strict=True):
        out[:, list(sampler.keys)] = sums
    np.divide(out, [c.values.size for c in columns], out=out)
    np.clip(out, 0.0, 1.0, out=out)
    return out


# --- the plan -------------------------------------------------------------------------------------


def plan(columns: Sequence[Column], n_rows: int) -> list[Counted | Frame]:
    """The samplers that draw every column: at most one `Frame`, then one `Counted` per other
    distinct sample (keys with identical values share one sampler)."""
    groups: dict[bytes, list[int]] = {}
    for i, column in enumerate(columns):
        groups.setdefault(column.values.tobytes(), []).append(i)
    alone = {keys[0]: Counted.of(tuple(keys), columns[keys[0]].values) for keys in groups.values()}
    frame = Frame.of(columns, alone, n_rows)
    samplers: list[Counted | Frame] = [frame] if frame else []
    taken = set(frame.keys) if frame else set()
    return samplers + [s for first, s in alone.items() if first not in taken]


@dataclass(frozen=True)
class Counted:
    """One sample's resample sums: its frequent values counted, the others gathered (module doc)."""

    keys: tuple[int, ...]
    n: int
    heavy: Floats  # distinct values drawn by counts, most frequent first
    categories: Ints  # their multiplicities, then the tail's size when there is a tail
    tail: Floats  # the other values, gathered one by one
    cost: float

    @classmethod
    def of(cls, keys: tuple[int, ...], values: Floats) -> Counted:
        distinct, inverse, multiplicity = np.unique(values, return_inverse=True, return_counts=True)
        order = np.argsort(-multiplicity, kind="stable")
        n_heavy, cost = _heavy_split(multiplicity[order], values.size)
        is_heavy = np.zeros(distinct.size, dtype=bool)
        is_heavy[order[:n_heavy]] = True
        tail = values[~is_heavy[inverse.ravel()]]
        categories = multiplicity[order[:n_heavy]]
        if tail.size:
            categories = np.append(categories, tail.size)
        return cls(keys, values.size, distinct[order[:n_heavy]], categories.astype(np.int64), tail, cost)

    def sums(self, n_resamples: int, rng: np.random.Generator) -> Floats:
        """(n_resamples, 1) resample sums."""
        counts = multinomial(self.n, self.categories, n_resamples, rng)
        total = np.zeros(n_resamples)
        if self.heavy.size:
            total += (counts[:, : self.heavy.size] * self.heavy).sum(axis=1)
        if self.tail.size:
            total += gathered_sums(self.tail, counts[:, -1], rng)
        return total[:, None]


def _heavy_split(multiplicity: Ints, n: int) -> tuple[int, float]:
    """How many of the most frequent values (``multiplicity`` sorted descending) to count rather than
    gather, and the cost per resample: one binomial split per category beyond the first."""
    n_heavy = np.arange(multiplicity.size + 1)
    tail = n - np.concatenate(([0], np.cumsum(multiplicity)))
    splits = np.where(tail > 0, n_heavy, np.maximum(n_heavy - 1, 0))
    cost = splits * _COST_BINOMIAL + tail * _COST_DRAW
    best = int(np.argmin(cost))
    return best, float(cost[best])


@dataclass(frozen=True)
class Frame:
    """Keys drawn together from shared per-atom streams (module doc). Class 0 is every row; each
    other class is the row set of some keys; atoms are the rows sharing the same classes."""

    keys: tuple[int, ...]
    key_class: npt.NDArray[np.intp]  # per key: its row set
    key_column: npt.NDArray[np.intp]  # per key: its column of ``table``
    table: Floats  # (rows, columns): the shared columns, rows sorted by atom
    atom_bounds: npt.NDArray[np.intp]  # atom a is table[atom_bounds[a]:atom_bounds[a + 1]]
    class_atoms: npt.NDArray[np.bool_]  # (classes, atoms) which atoms make up each class

    @classmethod
    def of(cls, columns: Sequence[Column], alone: Mapping[int, Counted], n_rows: int) -> Frame | None:
        """The frame of the samples that are row subsets of a full column, if cheaper than alone."""
        full = [i for i in alone if columns[i].values.size == n_rows]
        found = {i: _parent(columns, i, full) for i in alone if i not in full}
        parent = {i: p for i, p in found.items() if p is not None}
        if not parent:
            return None
        row_sets: dict[bytes, int] = {}
        for i in parent:
            row_sets.setdefault(columns[i].rows.tobytes(), len(row_sets) + 1)
        members = np.zeros((n_rows, len(row_sets)), dtype=bool)
        for i in parent:
            members[columns[i].rows, row_sets[columns[i].rows.tobytes()] - 1] = True
        signatures, atom_of_row = _distinct_rows(members)
        class_atoms = np.vstack([np.ones(len(signatures), dtype=bool), signatures.T])
        shared = list(dict.fromkeys(parent.values()))
        extra = [i for i in full if i not in shared and _COST_COLUMN * n_rows < alone[i].cost]
        table_columns = shared + extra
        splits = int(np.maximum(class_atoms.sum(axis=1) - 1, 0).sum())
        cost = n_rows * (_COST_DRAW + _COST_COLUMN * (len(table_columns) - 1)) + splits * _COST_BINOMIAL
        if cost >= sum(alone[i].cost for i in [*parent, *table_columns]):
            return None
        keys, key_class, key_column = [], [], []
        for i in table_columns:
            keys += alone[i].keys
            key_class += [0] * len(alone[i].keys)
            key_column += [table_columns.index(i)] * len(alone[i].keys)
        for i, p in parent.items():
            keys += alone[i].keys
            key_class += [row_sets[columns[i].rows.tobytes()]] * len(alone[i].keys)
            key_column += [table_columns.index(p)] * len(alone[i].keys)
        order = np.argsort(atom_of_row.ravel(), kind="stable")
        table = np.column_stack([columns[i].values for i in table_columns])[order]
        atom_bounds = np.concatenate(([0], np.cumsum(np.bincount(atom_of_row.ravel())))).astype(np.intp)
        return cls(tuple(keys), np.array(key_class, dtype=np.intp), np.array(key_column, dtype=np.intp),
                   np.ascontiguousarray(table), atom_bounds, class_atoms)

    def sums(self, n_resamples: int, rng: np.random.Generator) -> Floats:
        """(n_resamples, len(keys)) resample sums."""
        counts = self._atom_counts(n_resamples, rng)
        class_sums = np.zeros((len(self.class_atoms), n_resamples, self.table.shape[1]))
        for atom in range(len(self.atom_bounds) - 1):
            classes = np.flatnonzero(self.class_atoms[:, atom])
            pool = self.table[self.atom_bounds[atom] : self.atom_bounds[atom + 1]]
            class_sums[classes] += prefix_sums(pool, counts[classes, :, atom].T, rng).transpose(1, 0, 2)
        return class_sums[self.key_class, :, self.key_column].T

    def _atom_counts(self, n_resamples: int, rng: np.random.Generator) -> Ints:
        """(classes, n_resamples, atoms): how many of each class's draws fall in each atom."""
        sizes = np.diff(self.atom_bounds)
        counts = np.zeros((*self.class_atoms.shape[:1], n_resamples, sizes.size), dtype=np.int64)
        for c, atoms in enumerate(self.class_atoms):
            counts[c][:, atoms] = multinomial(int(sizes[atoms].sum()), sizes[atoms], n_resamples, rng)
        return counts


def _distinct_rows(matrix: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
    """The distinct rows of a boolean matrix (sorted) and each row's index among them."""
    packed = np.ascontiguousarray(np.packbits(matrix, axis=1))
    _, first, inverse = np.unique(packed.view(np.dtype((np.void, packed.shape[1]))).ravel(),
                                  return_index=True, return_inverse=True)
    return matrix[first], inverse.ravel()


def _parent(columns: Sequence[Column], i: int, full: Sequence[int]) -> int | None:
    """The first full column whose values on sample ``i``'s rows are ``i``'s values, if any."""
    rows, values = columns[i].rows, columns[i].values
    return next((p for p in full if np.array_equal(columns[p].values[rows], values)), None)


# --- exact samplers -------------------------------------------------------------------------------


def multinomial(n: int, categories: Ints, size: int, rng: np.random.Generator) -> Ints:
    """``size`` draws of Multinomial(n, categories / categories.sum()), shape (size, categories).

    By binary splits, one tree level per call: a node's count splits into Binomial(count, left weight
    / node weight) and the rest. Exact (it is the chain rule of the multinomial), and most splits
    are large, where numpy's binomial is fastest.
    """
    weight = np.concatenate(([0], np.cumsum(categories)))
    lo, hi = np.array([0]), np.array([categories.size])
    counts = np.full((size, 1), n, dtype=np.int64)
    while lo.size < categories.size:
        wide = hi - lo > 1
        mid = np.where(wide, (lo + hi) // 2, hi)
        left = counts.copy()
        share = (weight[mid] - weight[lo]) / (weight[hi] - weight[lo])
        left[:, wide] = rng.binomial(counts[:, wide], share[wide])
        lo, hi = np.column_stack([lo, mid]).ravel(), np.column_stack([mid, hi]).ravel()
        counts = np.stack([left, counts - left], axis=2).reshape(size, -1)
        keep = hi > lo
        lo, hi, counts = lo[keep], hi[keep], counts[:, keep]
    return counts


def gathered_sums(pool: Floats, lengths: Ints, rng: np.random.Generator) -> Floats:
    """For each resample b, the sum of ``lengths[b]`` uniform draws (with replacement) from ``pool``."""
    return segmented_draws(pool, lengths, rng)


def prefix_sums(pool: Floats, cuts: Ints, rng: np.random.Generator) -> Floats:
    """Resample b draws one stream of ``max(cuts[b])`` uniform rows of ``pool`` (rows, columns) and
    returns, for each i, the column sums of the stream's first ``cuts[b, i]`` rows: (b, i, column)."""
    order = np.argsort(cuts, axis=1, kind="stable")
    ordered = np.take_along_axis(cuts, order, axis=1)
    pieces = segmented_draws(pool, np.diff(ordered, axis=1, prepend=0).ravel(), rng)
    prefix = np.cumsum(pieces.reshape(*cuts.shape, -1), axis=1)
    out = np.empty_like(prefix)
    np.put_along_axis(out, order[:, :, None], prefix, axis=1)
    return out


def segmented_draws(pool: Floats, lengths: Ints, rng: np.random.Generator) -> Floats:
    """Draw ``lengths.sum()`` uniform rows of ``pool`` in order and return the sums of consecutive
    segments of ``lengths`` draws (zero for an empty one), a cache-sized pass at a time."""
    sums = np.zeros((lengths.size, *pool.shape[1:]))
    ends = np.cumsum(lengths)
    first = 0
    while first < lengths.size:
        done = int(ends[first - 1]) if first else 0
        stop = max(first + 1, int(np.searchsorted(ends, done + _CHUNK_ELEMENTS, side="right")))
        part = lengths[first:stop]
        picked = np.take(pool, rng.integers(0, len(pool), int(ends[stop - 1]) - done), axis=0)
        nonempty = part > 0
        if nonempty.any():
            starts = np.cumsum(part) - part
            sums[first:stop][nonempty] = np.add.reduceat(picked, starts[nonempty], axis=0)
        first = stop
    return sums


def flatten(stats: Mapping[str, KeyStats]) -> dict[str, float | int]:
    """simple-evals key style: ``key``, ``key:n_samples``, ``key:bootstrap_std`` plus CI bounds."""
    flat: dict[str, float | int] = {}
    for key, s in stats.items():
        flat[key] = s.mean
        flat[f"{key}:n_samples"] = s.n_samples
        flat[f"{key}:bootstrap_std"] = s.bootstrap_std
        flat[f"{key}:ci_lower"] = s.ci_lower
        flat[f"{key}:ci_upper"] = s.ci_upper
    return flat
