"""`rubric.conversation_metrics` of many answers at once (numpy); tests/test_rubric_columns.py pins it."""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from healthbench.scoring.stats import Column

Ints = npt.NDArray[np.intp]
Floats = npt.NDArray[np.float64]
Pairs = tuple[Ints, Ints]


@dataclass(frozen=True)
class Entries:
    """Answers' scores, by answer then dict order: ``keys[key[i]]`` of answer ``row[i]`` is ``value[i]``."""

    keys: list[str]  # keys[0] is `OVERALL`, which every answer has
    row: Ints
    key: Ints
    value: Floats

    def then(self, name: str, values: Floats) -> "Entries":  # per answer: dict(scores, name=values[row])
        keys, rows = self.keys if name in self.keys else [*self.keys, name], np.unique(self.row)
        code = np.full(rows.size, keys.index(name))
        return _merged(keys, np.r_[self.row, rows], np.r_[self.key, code], np.r_[self.value, values])

    def columns(self) -> dict[str, Column]:  # `healthbench.scoring.stats.columns_of` of the scores
        by = np.argsort(self.key, kind="stable")  # (each key's entries together, in row order)
        codes, first = np.unique(self.key[by], return_index=True)
        at = np.split(by, first[1:])
        return {self.keys[codes[i]]: Column(self.row[at[i]], self.value[at[i]]) for i in by[first].argsort()}


def rubric_entries(
    keys: list[str], n_items: Ints, points: Floats, met: Floats, tags: Pairs, example: Pairs
) -> Entries:
    """Scores of answers of ``n_items`` criteria (``points``, ``met`` 1.0 or 0.0); ``tags``: (criterion, key)
    per distinct tag of a criterion, ``example`` (answer, key) per example tag. No positive point: inf/NaN."""
    (criterion, tag), (owner, example_key), n = tags, example, n_items.size
    answer, positive, achieved = np.repeat(np.arange(n), n_items), np.maximum(points, 0.0), points * met
    with np.errstate(divide="ignore", invalid="ignore"):
        overall = np.bincount(answer, achieved, n) / np.bincount(answer, positive, n)
    group, first, inverse = np.unique(answer[criterion] * len(keys) + tag, True, True)
    tag_possible = np.bincount(inverse, positive[criterion], group.size)
    scored = np.flatnonzero(tag_possible > 0)[np.argsort(first[tag_possible > 0])]  # as first seen
    ratio = np.bincount(inverse, achieved[criterion], group.size)[scored] / tag_possible[scored]
    row = np.r_[np.arange(n), owner, group[scored] // len(keys)]
    key = np.r_[np.zeros(n, np.intp), example_key, group[scored] % len(keys)]
    return _merged(keys, row, key, np.r_[overall, overall[owner], ratio])


def _merged(keys: list[str], row: Ints, key: Ints, value: Floats) -> Entries:
    """Entries as a dict per answer makes them: a key at its first entry's place, with its last's value."""
    by = np.lexsort((key, row))
    starts = np.flatnonzero(np.diff(row[by], prepend=-1) | np.diff(key[by], prepend=-1))
    first, last = by[starts], by[np.r_[starts, by.size][1:] - 1]
    place = np.lexsort((first, row[first]))
    return Entries(keys, row[first][place], key[first][place], value[last][place])
