"""How per-conversation metric values are laid out as simple-evals' keys: one dict per
conversation (overall, then the example tags, then the rubric tags in order of first appearance) and
one `Column` per key (keys in the order they are first seen in those dicts). The values themselves
are computed by `healthbench.scoring.rubric`.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, count, repeat

import numpy as np
import numpy.typing as npt

from healthbench.scoring.stats import Column

OVERALL = "overall_score"


@dataclass(frozen=True)
class ExampleTags:
    """The example tags' names (by first appearance) and, per name, the graded conversations with it."""

    names: list[str]
    carriers: list[npt.NDArray[np.intp]]

    @staticmethod
    def carried(
        example_tags: list[list[str]], max_cells: int
    ) -> tuple[npt.NDArray[np.int64], list[str]] | None:
        """(conversations, names): 1 where a conversation carries an example tag (each at most once,
        see `once_each`), and the names (by first appearance); None beyond ``max_cells`` cells."""
        index: defaultdict[str, int] = defaultdict(count().__next__)
        tag = np.fromiter(map(index.__getitem__, chain.from_iterable(example_tags)), np.intp)
        names = list(index)
        n_conv = len(example_tags)
        if n_conv * len(names) > max_cells:
            return None
        conv = np.repeat(np.arange(n_conv), np.fromiter(map(len, example_tags), np.intp, n_conv))
        carried = np.bincount(conv * len(names) + tag, minlength=n_conv * len(names)).reshape(
            n_conv, len(names)
        )
        return carried, names


def once_each(tags: Sequence[str]) -> list[str]:
    """A conversation's example tags, each once (a repeated tag is one key, in its first place)."""
    return list(tags) if len(set(tags)) == len(tags) else list(dict.fromkeys(tags))


def _colliding_dict(score: float, example_tags: list[str], tags: list[tuple[str, float]]) -> dict[str, float]:
    """One conversation's dict when key names collide (an example tag also used as a rubric tag, or
    named like the overall score), built key by key: a later key overwrites an earlier one's value
    in its place, as simple-evals' dict updates do."""
    metrics = {OVERALL: float(score)} | dict.fromkeys(example_tags, float(score))
    metrics.update(tags)
    return metrics


def key_dicts(
    overall: npt.NDArray[np.float64],
    graded: npt.NDArray[np.bool_],
    example_tags: list[list[str]],
    names: list[str],
    entry: npt.NDArray[np.intp],
    ratio: npt.NDArray[np.float64],
    *,
    plain: bool = True,
) -> list[dict[str, float] | None]:
    """simple-evals' per-conversation dicts: overall, the example tags, then the scored rubric tags
    (``entry``: their cells, conversation by conversation in key order), None when ungraded; built
    key by key when names collide (not ``plain``, see `_colliding_dict`)."""
    if not plain:
        n_names = max(len(names), 1)
        starts = np.searchsorted(entry // n_names, np.arange(len(graded) + 1)).tolist()
        tags = list(zip([names[c % n_names] for c in entry.tolist()], ratio[entry].tolist(), strict=True))
        return [
            _colliding_dict(overall[c], example_tags[c], tags[starts[c] : starts[c + 1]]) if ok else None
            for c, ok in enumerate(graded.tolist())
        ]
    n_heads = np.where(graded, 1 + np.fromiter(map(len, example_tags), np.intp, len(graded)), 0)
    sizes = n_heads + np.bincount(entry // len(names), minlength=len(graded))
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    is_head = within < np.repeat(n_heads, sizes)
    keys = np.empty(is_head.size, dtype=object)
    graded_tags = itertools.compress(example_tags, graded.tolist())
    keys[is_head] = list(chain.from_iterable(chain.from_iterable(zip(repeat((OVERALL,)), graded_tags))))
    keys[~is_head] = np.array(names, dtype=object)[entry % len(names)]
    values = np.empty(is_head.size)
    values[is_head] = np.repeat(overall, n_heads)
    values[~is_head] = ratio[entry]
    key_iter, value_iter = iter(keys.tolist()), iter(values.tolist())
    slices = (
        map(itertools.islice, repeat(key_iter), sizes.tolist()),
        map(itertools.islice, repeat(value_iter), sizes.tolist()),
    )
    dicts: list[dict[str, float] | None] = list(map(dict, map(zip, *slices)))
    if not graded.all():
        for i in np.flatnonzero(~graded).tolist():
            dicts[i] = None
    return dicts


def key_columns(
    overall: npt.NDArray[np.float64],
    graded: npt.NDArray[np.bool_],
    example_tags: list[list[str]],
    examples: ExampleTags,
    names: list[str],
    scored: npt.NDArray[np.bool_],
    ratio: npt.NDArray[np.float64],
    entry: npt.NDArray[np.intp],
) -> dict[str, Column]:
    """One column per key (``scored`` and ``ratio`` are conversations x rubric tags), keys in the order
    they are first seen in the per-conversation dicts: by conversation, then position in its dict."""
    if not graded.any():
        return {}
    rank = np.cumsum(graded) - 1  # the row of each graded conversation
    columns = {OVERALL: Column(np.arange(int(graded.sum()), dtype=np.intp), overall[graded])}
    seen = {OVERALL: (int(np.argmax(graded)), 0)}
    for name, carriers in zip(examples.names, examples.carriers, strict=True):
        if carriers.size:
            first = int(carriers[0])
            columns[name] = Column(rank[carriers], overall[carriers])
            seen[name] = (first, 1 + example_tags[first].index(name))
    bounds = np.searchsorted(entry // len(names), np.arange(len(graded) + 1))
    for tag, name in enumerate(names):
        carriers = np.flatnonzero(scored[:, tag])
        if carriers.size:
            first = int(carriers[0])
            columns[name] = Column(rank[carriers], ratio[carriers, tag])
            at = np.flatnonzero(entry[bounds[first] : bounds[first + 1]] == first * len(names) + tag)[0]
            seen[name] = (first, 1 + len(example_tags[first]) + int(at))
    return {key: columns[key] for key in sorted(columns, key=seen.__getitem__)}
