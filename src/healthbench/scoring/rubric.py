"""Conversation-level HealthBench scores, exactly as simple-evals defines them.

- conversation score = points of met criteria (negatives included) / sum of positive points;
- every example tag (``theme:``, ``physician_agreed_category:``) takes the conversation score;
- every rubric tag (``axis:``, ``level:``, ``cluster:``) gets the same ratio over its own criteria,
  present only when that tag has at least one positive-point criterion.

A criterion the judge could not grade is `Verdict.UNGRADED`: never counted as met or not met. A
conversation with any ungraded criterion has no score (it is left out of the aggregate).
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import chain, count
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from healthbench.scoring.metric_layout import OVERALL, ExampleTags, key_columns, key_dicts, once_each
from healthbench.scoring.stats import Column, columns_of
from healthbench.scoring.verdict import Verdict

if TYPE_CHECKING:  # only read by attribute: scoring never loads the pydantic models
    from healthbench.data.schema import Conversation

__all__ = [
    "OVERALL",
    "VERDICT_CODES",
    "KeyMembers",
    "MetricTable",
    "RubricLayout",
    "Verdict",
    "batch_metrics",
    "columns_metrics",
    "conversation_metrics",
    "joined_tables",
    "key_members",
    "length_adjusted",
    "verdict_codes",
]


VERDICT_CODES = (Verdict.MET, Verdict.NOT_MET, Verdict.UNGRADED)  # a verdict's code: its index here


def verdict_codes(verdicts: Iterable[Verdict], n: int) -> npt.NDArray[np.int8]:
    """The codes (`VERDICT_CODES`) of ``n`` verdicts, as one array."""
    ids = np.fromiter(map(id, verdicts), np.intp, n)
    return np.select([ids == id(Verdict.MET), ids == id(Verdict.NOT_MET)], [0, 1], 2).astype(np.int8)


def conversation_metrics(conversation: Conversation, verdicts: Sequence[Verdict]) -> dict[str, float] | None:
    """All per-conversation metric values, or None when any criterion is ungraded: `batch_metrics` of
    this one conversation (the definitions: module doc). Keys: overall, then the example tags, then
    the rubric tags in order of first appearance; a later key of the same name overwrites an earlier
    one's value in its place, as simple-evals' dict updates do."""
    return batch_metrics([conversation], [verdicts]).per_conversation[0]


@dataclass(frozen=True)
class MetricTable:
    """`conversation_metrics` of many conversations: simple-evals' per-conversation dicts (None when
    ungraded), and the same values as one `Column` per key, keys in first-seen order, whose rows are
    the positions among the graded conversations."""

    per_conversation: list[dict[str, float] | None]  # empty when built without dicts
    columns: dict[str, Column]
    ungraded_criteria: int
    graded: npt.NDArray[np.bool_] | None = None  # per conversation, when known


def batch_metrics(
    conversations: Sequence[Conversation], verdicts: Sequence[Sequence[Verdict]]
) -> MetricTable:
    """The per-conversation metrics of every conversation (module doc), computed over all criteria
    at once: the one implementation of the rubric score.

    Sums are `np.bincount` accumulations, which add the points in criterion order, as simple-evals'
    loop does. A `ValueError` for a conversation with more or fewer verdicts than criteria, or a
    graded one without positive points. A batch with very many distinct tags is scored in parts.
    """
    if len(conversations) != len(verdicts):
        raise ValueError(f"{len(conversations)} conversations but {len(verdicts)} verdict lists")
    if not conversations:
        return MetricTable([], {}, 0)
    criteria = _Criteria.of(conversations, verdicts)
    if criteria is None:
        c, v = next((c, v) for c, v in zip(conversations, verdicts, strict=True) if len(c.rubrics) != len(v))
        raise ValueError(f"{len(c.rubrics)} rubric items but {len(v)} verdicts")
    structure = _Structure.of(criteria)
    if structure is None:  # too many (conversation, tag) cells at once: score the halves
        if len(conversations) == 1:
            raise ValueError(f"conversation {conversations[0].prompt_id} has too many distinct tags")
        half = len(conversations) // 2
        return joined_tables(
            [
                batch_metrics(conversations[:half], verdicts[:half]),
                batch_metrics(conversations[half:], verdicts[half:]),
            ]
        )
    table = structure.table(criteria)
    if table is None:
        bad = next(
            c
            for c, v in zip(conversations, verdicts, strict=True)
            if Verdict.UNGRADED not in v and not any(item.points > 0 for item in c.rubrics)
        )
        raise ValueError(f"conversation {bad.prompt_id} has no positive points")
    return table


@dataclass(frozen=True)
class KeyMembers:
    """One key's criteria in the graded conversations that have it, for scores that weigh them
    otherwise (`healthbench.scoring.correction`): ``rows`` as in `Column`; per member criterion (in
    criterion order) its ``row`` (an index into ``rows``) and its index in the batch's criteria
    (conversations' rubrics one after another); per row the key's positive points."""

    rows: npt.NDArray[np.intp]
    row: npt.NDArray[np.intp]
    criterion: npt.NDArray[np.intp]
    possible: npt.NDArray[np.float64]


def key_members(
    conversations: Sequence[Conversation], verdicts: Sequence[Sequence[Verdict]]
) -> dict[str, KeyMembers]:
    """`KeyMembers` of every key of `batch_metrics` (in its order): overall and the example tags take
    every criterion of their conversations, a rubric tag its own criteria (each once)."""
    table = batch_metrics(conversations, verdicts)  # (raises for a bad batch)
    criteria = _Criteria.of(conversations, verdicts)
    if criteria is None or table.graded is None:  # (no conversation)
        return {}
    structure = _Structure.of(criteria)
    if structure is None:
        raise ValueError("too many distinct tags in one batch to weigh their criteria")
    graded, index = table.graded, {name: i for i, name in enumerate(criteria.names)}
    rank = np.cumsum(graded) - 1
    n_names = max(len(criteria.names), 1)
    occurrence_conv = structure.cell // n_names
    members = {}
    for key, column in table.columns.items():
        if key in index:  # a rubric tag: its counted occurrences in conversations where it is scored
            chosen = (structure.cell % n_names == index[key]) & graded[occurrence_conv]
            chosen &= structure.tag_possible[structure.cell] > 0
            items, conv = structure.tag_items[chosen], occurrence_conv[chosen]
            possible = structure.tag_possible[structure.cell[chosen]]
        else:  # overall or an example tag: every criterion of the conversations that have it
            items = np.flatnonzero(graded[structure.conv_of_item])
            items = items[np.isin(rank[structure.conv_of_item[items]], column.rows)]
            conv = structure.conv_of_item[items]
            possible = structure.possible[conv]
        row = np.searchsorted(column.rows, rank[conv])
        per_row = np.zeros(column.rows.size)
        per_row[row] = possible
        members[key] = KeyMembers(column.rows, row, items, per_row)
    return members


def joined_tables(tables: Sequence[MetricTable]) -> MetricTable:
    """The table of consecutive parts of a batch (their conversations one after another), the same
    as the whole batch's: each conversation's values are its own (computed from its criteria
    alone), a key's column is its parts' columns one after another (rows shifted by the graded
    conversations before), and keys come in first-seen order. Every part has its per-conversation
    dicts, or none has (`RubricLayout.metrics` without ``dicts``)."""
    if len(tables) == 1:
        return tables[0]
    graded = [_graded_of(t) for t in tables]
    with_dicts = [bool(t.per_conversation) for t, g in zip(tables, graded, strict=True) if g.size]
    if any(with_dicts) and not all(with_dicts):
        raise ValueError("cannot join tables with and without their per-conversation dicts")
    parts: dict[str, tuple[list[npt.NDArray[np.intp]], list[npt.NDArray[np.float64]]]] = {}
    offset = 0
    for table, part_graded in zip(tables, graded, strict=True):
        for key, column in table.columns.items():
            rows, values = parts.setdefault(key, ([], []))
            rows.append(column.rows + offset)
            values.append(column.values)
        offset += int(part_graded.sum())
    return MetricTable(
        [m for t in tables for m in t.per_conversation],
        {key: Column(np.concatenate(rows), np.concatenate(values)) for key, (rows, values) in parts.items()},
        sum(t.ungraded_criteria for t in tables),
        np.concatenate(graded) if graded else np.zeros(0, dtype=bool),
    )


def _graded_of(table: MetricTable) -> npt.NDArray[np.bool_]:
    """Per conversation of ``table``, whether it is graded."""
    if table.graded is not None:
        return table.graded
    return np.fromiter((m is not None for m in table.per_conversation), bool, len(table.per_conversation))


@dataclass(frozen=True)
class RubricLayout:
    """The rubric side of a batch (each conversation's criteria, points and tags, flattened), read
    once and reused for every run of the same conversations: only the verdicts change."""

    criteria: _Criteria
    structure: _Structure | None  # None: unusual (see `batch_metrics`)

    @classmethod
    def of(cls, conversations: Sequence[Conversation]) -> RubricLayout | None:
        """None when a batch is unusual (see `batch_metrics`)."""
        placeholder = [(Verdict.NOT_MET,) * len(c.rubrics) for c in conversations]
        criteria = _Criteria.of(conversations, placeholder)
        return cls(criteria, _Structure.of(criteria)) if criteria is not None else None

    def metrics(self, verdicts: Sequence[Sequence[Verdict]], *, dicts: bool = True) -> MetricTable | None:
        """`batch_metrics` of these conversations graded by ``verdicts`` (None: use `batch_metrics`);
        without the per-conversation ``dicts`` (the slowest part) unless asked."""
        n_items = np.fromiter(map(len, verdicts), np.intp, len(verdicts))
        if self.structure is None or not np.array_equal(n_items, self.criteria.n_items):
            return None
        codes = verdict_codes(chain.from_iterable(verdicts), self.criteria.points.size)
        return self.coded_metrics(n_items, codes, dicts=dicts)

    def coded_metrics(
        self, n_items: npt.NDArray[np.intp], codes: npt.NDArray[np.int8], *, dicts: bool = True
    ) -> MetricTable | None:
        """`metrics` of verdicts given as codes (`VERDICT_CODES`, criteria one after another;
        ``n_items`` per conversation), as a reader of columns has them."""
        if self.structure is None or not np.array_equal(n_items, self.criteria.n_items):
            return None
        criteria = replace(self.criteria, met=codes == 0, ungraded=codes == 2)
        return self.structure.table(criteria, dicts)


def columns_metrics(
    n_items: Sequence[int],
    points: Sequence[float],
    verdicts: Sequence[Verdict],
    criterion_tags: Sequence[Sequence[str]],
    example_tags: Sequence[Sequence[str]],
) -> MetricTable | None:
    """`batch_metrics` of graded criteria given as flat columns (criteria in conversation order:
    ``n_items[c]`` criteria for conversation ``c``), for readers that never build `Conversation`s.
    None for the unusual batches `batch_metrics` scores one conversation at a time (see there)."""
    names: defaultdict[str, int] = defaultdict(count().__next__)
    tags = np.fromiter(map(names.__getitem__, chain.from_iterable(criterion_tags)), np.intp)
    code = np.fromiter(map(id, verdicts), np.intp, len(verdicts))
    if len(points) != len(verdicts) or sum(n_items) != len(points):
        raise ValueError("the columns do not line up")
    criteria = _Criteria(
        np.asarray(n_items, dtype=np.intp),
        np.asarray(points, dtype=np.float64),
        code == id(Verdict.MET),
        code == id(Verdict.UNGRADED),
        np.fromiter(map(len, criterion_tags), np.intp, len(criterion_tags)),
        tags,
        list(names),
        [once_each(t) for t in example_tags],
    )
    return criteria.table()


_MAX_CELLS = 1 << 24  # conversations x distinct tags for the dense per-tag sums; beyond, in parts
_POINTS, _TAGS = operator.attrgetter("points"), operator.attrgetter("tags")


@dataclass(frozen=True)
class _Criteria:
    """Every criterion of a batch flattened in order, with its tag occurrences (as indices into
    ``names``, by first appearance) and each conversation's example tags."""

    n_items: npt.NDArray[np.intp]  # criteria per conversation
    points: npt.NDArray[np.float64]
    met: npt.NDArray[np.bool_]
    ungraded: npt.NDArray[np.bool_]
    n_tags: npt.NDArray[np.intp]  # tags per criterion
    tag: npt.NDArray[np.intp]
    names: list[str]
    example_tags: list[list[str]]

    @classmethod
    def of(
        cls, conversations: Sequence[Conversation], verdicts: Sequence[Sequence[Verdict]]
    ) -> _Criteria | None:
        """None when a conversation has more or fewer verdicts than criteria.

        One pass, conversation by conversation: reading the criteria's fields is bound by memory
        latency, so each is read once, while its conversation is in cache.
        """
        n_items = np.fromiter(map(len, verdicts), np.intp, len(verdicts))
        names: defaultdict[str, int] = defaultdict(count().__next__)  # tag -> index, by first appearance
        lookup = names.__getitem__
        points: list[float] = []
        n_tags: list[int] = []
        tags: list[int] = []
        example_tags: list[list[str]] = []
        for conversation, n in zip(conversations, n_items.tolist(), strict=True):
            rubric = conversation.rubrics
            if len(rubric) != n:
                return None
            tag_lists = list(map(_TAGS, rubric))
            points.extend(map(_POINTS, rubric))
            n_tags.extend(map(len, tag_lists))
            tags.extend(map(lookup, chain.from_iterable(tag_lists)))
            example_tags.append(once_each(conversation.example_tags))
        verdict = np.fromiter(map(id, chain.from_iterable(verdicts)), np.intp, len(points))
        return cls(
            n_items,
            np.fromiter(points, np.float64, len(points)),
            verdict == id(Verdict.MET),
            verdict == id(Verdict.UNGRADED),
            np.fromiter(n_tags, np.intp, len(n_tags)),
            np.fromiter(tags, np.intp, len(tags)),
            list(names),
            example_tags,
        )

    def table(self, dicts: bool = True) -> MetricTable | None:
        """The metrics, or None when `batch_metrics` must decide (too many tags, no positive points)."""
        structure = _Structure.of(self)
        return structure.table(self, dicts) if structure is not None else None


@dataclass(frozen=True)
class _Structure:
    """What the metrics of a batch need that does not depend on its verdicts: each criterion's
    conversation, each (conversation, rubric tag) cell's criteria and positive points, and the
    example tags (computed once for every run of the same conversations)."""

    conv_of_item: npt.NDArray[np.intp]
    possible: npt.NDArray[np.float64]  # per conversation: its positive points
    tag_items: npt.NDArray[np.intp]  # per counted tag occurrence: its criterion
    cell: npt.NDArray[np.intp]  # per counted tag occurrence: its (conversation, tag) cell
    tag_possible: npt.NDArray[np.float64]  # per cell: its positive points
    first_in_cell: npt.NDArray[np.bool_]  # per counted tag occurrence: the first of its cell
    carried: npt.NDArray[np.int64]  # (conversations, example tag names): 1 where carried
    example_names: list[str]
    plain: bool  # no name is both an example tag and a rubric tag (or overall's): keys never collide

    @classmethod
    def of(cls, criteria: _Criteria) -> _Structure | None:
        """None when the batch has too many (conversation, tag) cells (see `batch_metrics`)."""
        n_conv, n_names = len(criteria.n_items), len(criteria.names)
        if n_conv * n_names > _MAX_CELLS:
            return None
        carried = ExampleTags.carried(criteria.example_tags, _MAX_CELLS)
        if carried is None:
            return None
        rubric_names = set(criteria.names)
        plain = (
            rubric_names.isdisjoint(carried[1]) and OVERALL not in rubric_names and OVERALL not in carried[1]
        )
        conv_of_item = np.repeat(np.arange(n_conv), criteria.n_items)
        positive = np.where(criteria.points > 0, criteria.points, 0.0)
        item_of_tag = np.repeat(np.arange(len(criteria.points)), criteria.n_tags)
        kept = _first_in_criterion(criteria.tag, item_of_tag)
        tag_items = item_of_tag[kept]
        cell = conv_of_item[tag_items] * n_names + criteria.tag[kept]
        position = np.arange(cell.size, dtype=np.int32)
        first = np.full(n_conv * n_names, cell.size, dtype=np.int32)
        np.minimum.at(first, cell, position)
        return cls(
            conv_of_item,
            np.bincount(conv_of_item, positive, n_conv).astype(np.float64, copy=False),
            tag_items,
            cell,
            np.bincount(cell, positive[tag_items], n_conv * n_names).astype(np.float64, copy=False),
            first[cell] == position,
            carried[0],
            carried[1],
            plain,
        )

    def table(self, criteria: _Criteria, dicts: bool = True) -> MetricTable | None:
        """The metrics of ``criteria`` (these conversations graded), or None when a graded
        conversation has no positive points."""
        n_conv, n_names = len(criteria.n_items), len(criteria.names)
        graded = np.bincount(self.conv_of_item, criteria.ungraded, n_conv) == 0
        if np.any(graded & (self.possible == 0)):
            return None
        earned = np.where(criteria.met, criteria.points, 0.0)
        overall = np.divide(
            np.bincount(self.conv_of_item, earned, n_conv), self.possible, where=graded, out=np.zeros(n_conv)
        )
        examples = ExampleTags(
            self.example_names,
            [np.flatnonzero(self.carried[:, e] & graded) for e in range(len(self.example_names))],
        )
        scored = ((self.tag_possible.reshape(n_conv, n_names) > 0) & graded[:, None]).ravel()
        ratio = np.bincount(self.cell, earned[self.tag_items], n_conv * n_names).astype(
            np.float64, copy=False
        )
        np.divide(ratio, self.tag_possible, where=scored, out=ratio)  # (only scored cells are read)
        entry = self.cell[self.first_in_cell & scored[self.cell]]  # per conversation, in order
        if not self.plain:
            every = key_dicts(
                overall, graded, criteria.example_tags, criteria.names, entry, ratio, plain=False
            )
            columns_by_rows = columns_of([m for m in every if m is not None])
            return MetricTable(every if dicts else [], columns_by_rows, int(criteria.ungraded.sum()), graded)
        per_conversation = (
            key_dicts(overall, graded, criteria.example_tags, criteria.names, entry, ratio) if dicts else []
        )
        columns = key_columns(
            overall,
            graded,
            criteria.example_tags,
            examples,
            criteria.names,
            scored.reshape(n_conv, n_names),
            ratio.reshape(n_conv, n_names),
            entry,
        )
        return MetricTable(per_conversation, columns, int(criteria.ungraded.sum()), graded)


def _first_in_criterion(
    tag: npt.NDArray[np.intp], item_of_tag: npt.NDArray[np.intp]
) -> npt.NDArray[np.bool_]:
    """False for a tag occurrence that repeats a tag earlier in the same criterion (it counts once)."""
    kept = np.ones(tag.size, dtype=bool)
    lag = 1
    while lag < tag.size and np.any(item_of_tag[lag:] == item_of_tag[:-lag]):
        kept[lag:] &= ~((item_of_tag[lag:] == item_of_tag[:-lag]) & (tag[lag:] == tag[:-lag]))
        lag += 1
    return kept


def length_adjusted(score: float, response_length: int, *, penalty: float, center: float) -> float:
    """Score minus ``penalty`` per 500 characters the response is longer than ``center``."""
    return score - penalty * (response_length - center) / 500
