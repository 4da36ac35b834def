"""Columnar reading of a simple-evals ``_allresults.json`` for scoring: one msgspec schema validates
the whole file in one batch and the criteria go straight into flat columns
(`healthbench.scoring.rubric.columns_metrics`), without building a `GradedSample` per answer.

Only a valid file is read here: on anything unusual (a field that does not fit the schema, an
answer that is not one message, an empty prompt or rubric, a rubric that differs from the dataset's,
prompt_ids missing from the dataset) `read_columns` returns None, and the caller reads the file with
`healthbench.results.simple_evals.load_allresults`, whose error names the file, the example and the
field. Both readers give the same numbers (a test checks it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from healthbench.data.rubric_index import IndexedConversation, Message, Points, is_text
from healthbench.scoring.rubric import MetricTable, Verdict, columns_metrics


class _Item(msgspec.Struct):
    criterion: str
    points: Points
    tags: list[str]
    criteria_met: bool | None


class _Example(msgspec.Struct):
    prompt_id: str
    rubric_items: list[_Item]
    prompt: list[Message]
    completion: list[Message]
    usage: dict[str, Any] | None = None


class _Metadata(msgspec.Struct):
    example_level_metadata: list[_Example]


class _File(msgspec.Struct):
    metadata: _Metadata
    score: float | None = None
    metrics: dict[str, Any] = msgspec.field(default_factory=dict)


_DECODER = msgspec.json.Decoder(_File)
_VERDICTS = {True: Verdict.MET, False: Verdict.NOT_MET, None: Verdict.UNGRADED}


@dataclass(frozen=True)
class ColumnarResults:
    """The per-answer metrics of a file, the numbers it reports, and its answers' prompt_ids and
    lengths (in file order)."""

    table: MetricTable
    score: float | None
    metrics: dict[str, Any]
    prompt_ids: list[str]
    completions: list[msgspec.Raw]  # each answer's text as raw JSON

    def completion_lengths(self) -> list[int]:
        """Each answer's length in characters (decodes the answers)."""
        return [len(msgspec.json.decode(raw, type=str)) for raw in self.completions]


def read_columns(
    path: str | os.PathLike[str],
    dataset: Mapping[str, IndexedConversation] | None = None,
    *,
    allow_missing: bool = False,
) -> ColumnarResults | None:
    """The file's metrics, with example tags from ``dataset`` (joined on prompt_id), or None when
    `load_allresults` must read it (module doc)."""
    try:
        document = _DECODER.decode(Path(path).read_bytes())
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    n_items: list[int] = []
    points: list[float] = []
    verdicts: list[Verdict] = []
    criterion_tags: list[list[str]] = []
    example_tags: list[tuple[str, ...]] = []
    for example in document.metadata.example_level_metadata:
        items = example.rubric_items
        if not example.prompt or len(example.completion) != 1 or not items:
            return None
        if not all(is_text(m.content) for m in (*example.prompt, *example.completion)):
            return None
        known = dataset.get(example.prompt_id) if dataset is not None else None
        if known is None:
            if (dataset is not None and not allow_missing) or not any(i.points > 0 for i in items):
                return None
            example_tags.append(())
        else:
            if known.rubric != tuple((i.criterion, i.points, tuple(i.tags)) for i in items):
                return None
            example_tags.append(known.example_tags)
        n_items.append(len(items))
        points.extend([i.points for i in items])
        verdicts.extend([_VERDICTS[i.criteria_met] for i in items])
        criterion_tags.extend([i.tags for i in items])
    table = columns_metrics(n_items, points, verdicts, criterion_tags, example_tags)
    if table is None:
        return None
    examples = document.metadata.example_level_metadata
    return ColumnarResults(
        table=table,
        score=document.score,
        metrics=document.metrics,
        prompt_ids=[e.prompt_id for e in examples],
        completions=[e.completion[0].content for e in examples],
    )
