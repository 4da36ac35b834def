"""Choosing which conversations to run: by prompt id, by theme, and ``--limit`` exactly as simple-evals.

simple-evals draws ``random.Random(0).sample(examples, n)`` when ``n`` is below the number of
examples; we do the same, after the id and theme filters, so ``--limit`` picks the same conversations.

`select_pages` makes the same choice over a dataset read a page at a time (a run's set-up): a first
read keeps of each row only what the choice looks at (its prompt_id, its example tags when themes are
asked for, its category when categories are), `select` chooses among those keys, and a second read
gives the chosen rows with their position in the choice. ``Random.sample`` draws indices from the
population's length and ``k`` only, so sampling the keys picks the rows sampling the rows would.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from healthbench.errors import DataError


class HasPromptId(Protocol):
    @property
    def prompt_id(self) -> str: ...


T = TypeVar("T", bound=HasPromptId)


def select(
    records: Sequence[T],
    *,
    limit: int | None = None,
    ids: Sequence[str] | None = None,
    themes: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
) -> list[T]:
    """Filter by ids / themes / categories, then take simple-evals' deterministic ``limit`` sample."""
    chosen = list(records)
    if ids:
        wanted = list(dict.fromkeys(ids))
        by_id = {r.prompt_id: r for r in chosen}
        missing = [i for i in wanted if i not in by_id]
        if missing:
            raise DataError(
                f"prompt_id not in the dataset: {', '.join(missing[:5])}"
                + (f" (and {len(missing) - 5} more)" if len(missing) > 5 else "")
            )
        keep = set(wanted)
        chosen = [r for r in chosen if r.prompt_id in keep]
    if themes:
        tags = {t if t.startswith("theme:") else f"theme:{t}" for t in themes}
        chosen = [r for r in chosen if tags & set(getattr(r, "example_tags", ()))]
        if not chosen:
            raise DataError(f"no conversation has the theme {_listed(themes, tags)}")
    if categories:
        cats = {c if c.startswith("cluster:") else f"cluster:{c}" for c in categories}
        chosen = [r for r in chosen if getattr(r, "category", None) in cats]
        if not chosen:
            raise DataError(f"no row is in the category {_listed(categories, cats)}")
    if limit is not None:
        if limit < 1:
            raise DataError(f"--limit must be at least 1, got {limit}")
        if limit < len(chosen):
            chosen = random.Random(0).sample(chosen, limit)
    if not chosen:
        raise DataError("no conversations left after filtering (the dataset is empty)")
    return chosen


def _listed(given: Sequence[str], full: set[str]) -> str:
    """What was asked for, as a user reads it: ``'emergency_referrals' (theme:emergency_referrals)``."""
    return " or ".join(repr(g) for g in dict.fromkeys(given)) + f" ({', '.join(sorted(full))})"


Record = TypeVar("Record")
Row = TypeVar("Row", bound=HasPromptId)
Built = TypeVar("Built")


class _Key:
    """What the choice looks at of one row, and where the row is (its index in the file's rows)."""

    __slots__ = ("category", "example_tags", "index", "prompt_id")

    def __init__(self, row: HasPromptId, index: int, *, tags: bool, category: bool) -> None:
        self.prompt_id = row.prompt_id
        self.example_tags: tuple[str, ...] = tuple(getattr(row, "example_tags", ())) if tags else ()
        self.category: str | None = getattr(row, "category", None) if category else None
        self.index = index


@dataclass(frozen=True)
class Chosen(Generic[Built]):
    """The rows `select_pages` chose: how many, and a second read of the dataset that gives them."""

    count: int
    _pages: Callable[[], Iterable[Sequence[Any]]]
    _rows_of: Callable[[Any], Sequence[Any]]
    _build: Callable[[list[Any]], list[Built]] | None
    # a chosen row's index in the file's rows -> its position in the choice and its prompt_id
    _chosen: dict[int, tuple[int, str]]
    _rows: int

    def rows(self) -> Iterator[tuple[int, Built]]:
        """(position in the choice, row) of every chosen row, in the file's order (reads it again; with
        ``build``, the rows it builds of a page's chosen rows). A file that is not the one read
        before (other rows) is a `DataError` raised before the end."""
        index = 0
        for page in self._pages():
            positions: list[int] = []
            picked: list[Any] = []
            for record in page:
                for row in self._rows_of(record):
                    chosen = self._chosen.get(index)
                    if chosen is not None:
                        position, prompt_id = chosen
                        if row.prompt_id != prompt_id:
                            raise _changed()
                        positions.append(position)
                        picked.append(row)
                    index += 1
            if picked:
                yield from zip(positions, picked if self._build is None else self._build(picked), strict=True)
        if index != self._rows:
            raise _changed()


def _itself(record: Any) -> tuple[Any]:
    return (record,)


def _changed() -> DataError:
    return DataError("the dataset file changed while it was read; nothing was stored, run it again")


def select_pages(
    pages: Callable[[], Iterable[Sequence[Record]]],
    *,
    rows_of: Callable[[Record], Sequence[Row]] | None = None,
    build: Callable[[list[Row]], list[Built]] | None = None,
    limit: int | None = None,
    ids: Sequence[str] | None = None,
    themes: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    before_choice: Callable[[int], None] | None = None,
) -> Chosen[Any]:
    """`select` over the rows of a dataset read a page at a time (``pages()`` reads it; ``rows_of``
    makes a record's rows, default the record itself), holding one page and a key per row: the same
    rows in the same order, the same errors. The whole file is read (and so checked) before this
    returns; `Chosen.rows` reads it again for the chosen rows, and ``build`` (when given) makes what
    is stored of a page's chosen rows (records of decoded lines: only the chosen are built).
    ``before_choice`` (the caller's own check of what was read) is called with the number of rows
    between the two reads."""
    expand: Callable[[Any], Sequence[Any]] = rows_of or _itself
    rows = (row for page in pages() for record in page for row in expand(record))
    found = [_Key(row, i, tags=bool(themes), category=bool(categories)) for i, row in enumerate(rows)]
    if before_choice is not None:
        before_choice(len(found))
    chosen = select(found, limit=limit, ids=ids, themes=themes, categories=categories)
    at = {key.index: (position, key.prompt_id) for position, key in enumerate(chosen)}
    return Chosen(len(chosen), pages, expand, build, at, len(found))
