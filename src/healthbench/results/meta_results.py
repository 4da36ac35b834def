"""Meta-eval results: judge labels read back from the store (or from a file made elsewhere) and the
agreement metrics of `healthbench.scoring.meta` computed on them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from healthbench.data.jsonl import Source, decode_lines, load_json, read_lines, source_bytes
from healthbench.data.schema import MetaEvalRecord, meta_records_of, row_id
from healthbench.data.shapes import MetaLine
from healthbench.data.sources import load_meta_eval
from healthbench.data.subset import select
from healthbench.defaults import DEFAULT_MIN_PHYSICIAN_RATINGS
from healthbench.errors import DataError
from healthbench.results.views import VERDICTS, RunView
from healthbench.scoring.meta import MetaEvalResult, meta_metrics
from healthbench.scoring.verdict import Verdict
from healthbench.store.runs import RunRecord, Store


def stored_labels(store: Store, run: RunRecord) -> tuple[list[MetaEvalRecord], list[bool | None]]:
    """Rows (repeated ``n_repeats`` times) and the chair's label on each (None = ungraded): a
    single judge's labels (every member's: `stored_verdicts`)."""
    rows, verdicts = stored_verdicts(store, run)
    chair = next(iter(verdicts.values()))
    return rows, [verdict.criteria_met for verdict in chair]


def stored_verdicts(store: Store, run: RunRecord) -> tuple[list[MetaEvalRecord], dict[str, list[Verdict]]]:
    """Rows (repeated ``n_repeats`` times) and each member's verdict on each, by label in panel order
    (the chair first; a single judge is a panel of one). A missing grade is ungraded."""
    view = RunView.of(store, run).require_kind("meta_eval")
    records = view.meta_records()
    grades = store.grade_progress(run.id)
    members = [member.label for member in view.config.panel]
    rows = [record for _ in range(view.config.n_repeats) for record in records]
    verdicts: dict[str, list[Verdict]] = {}
    for judge in members:
        verdicts[judge] = [
            VERDICTS[grades.get((row_id(record), repeat, 0, judge), ("ungraded", 0))[0]]
            for repeat in range(view.config.n_repeats)
            for record in records
        ]
    return rows, verdicts


def score_meta_run(
    store: Store, run: RunRecord, *, min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS
) -> MetaEvalResult:
    rows, labels = stored_labels(store, run)
    return meta_metrics(rows, labels, min_physician_ratings=min_physician_ratings)


def labelled_rows(
    labels: Source,
    variant: str,
    *,
    data: Source | None = None,
    names: tuple[str, str] | None = None,
    cache: str | Path | None = None,
    limit: int | None = None,
    categories: Sequence[str] | None = None,
) -> tuple[list[MetaEvalRecord], list[bool | None]]:
    """The meta-eval rows of ``variant`` (or ``data``) chosen by ``limit`` and ``categories`` as a
    meta-eval run chooses them, and the judge label of each from a label file made elsewhere
    (`read_labels`; None = no label). ``labels`` and ``data`` are paths or bytes; ``names`` (of the
    labels, of the data) name bytes in errors."""
    label_name, data_name = names or (None, None)
    if isinstance(data, bytes):
        records = meta_records_of(read_lines(data, MetaLine, name=data_name))
    else:
        _, records = load_meta_eval(variant, data=data, cache=cache)
    chosen = select(records, limit=limit, categories=categories)
    every = {(r.completion_id, r.rubric): r for r in records}
    found = read_labels(labels, list(every.values()), name=label_name)  # checked on every row, then chosen
    by_key = dict(zip(every, found, strict=True))
    chosen_labels = [by_key[(r.completion_id, r.rubric)] for r in chosen]
    if all(label is None for label in chosen_labels):
        raise DataError(
            f"none of the {len(chosen)} rows chosen (--limit, --category) has a label in this file",
            path=label_name or ("<bytes>" if isinstance(labels, bytes) else str(labels)),
        )
    return chosen, chosen_labels


def score_label_file(
    labels: Source,
    variant: str,
    *,
    data: Source | None = None,
    cache: str | Path | None = None,
    limit: int | None = None,
    categories: Sequence[str] | None = None,
    min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS,
) -> MetaEvalResult:
    """Agreement metrics of judge labels made elsewhere on the chosen meta-eval rows
    (`labelled_rows`)."""
    rows, found = labelled_rows(labels, variant, data=data, cache=cache, limit=limit, categories=categories)
    return meta_metrics(rows, found, min_physician_ratings=min_physician_ratings)


def read_labels(
    path: Source, records: Sequence[MetaEvalRecord], *, name: str | None = None
) -> list[bool | None]:
    """Judge labels produced elsewhere: JSONL lines ``{"completion_id", "rubric", "criteria_met"}``
    (``label`` is accepted for ``criteria_met``). Rows without a label are ungraded; a label for a row
    that is not in the dataset, a duplicate, or a non-boolean label is an error naming the line."""
    data, source = source_bytes(path, name)
    wanted = {(r.completion_id, r.rubric) for r in records}
    found: dict[tuple[str, str], bool] = {}
    for number, line in enumerate(decode_lines(data, source=source), start=1):
        if not line.strip():
            continue
        obj = load_json(line, source=source, line=number)
        if not isinstance(obj, dict):
            raise DataError("expected a JSON object", path=source, line=number)
        for field in ("completion_id", "rubric"):
            if not isinstance(obj.get(field), str):
                raise DataError("missing or not a string", path=source, line=number, field=field)
        given = [name for name in ("criteria_met", "label") if name in obj]
        field = given[0] if given else "criteria_met"
        for name in given or [field]:
            if not isinstance(obj.get(name), bool):
                raise DataError(
                    f"expected true or false, got {json.dumps(obj.get(name))}",
                    path=source,
                    line=number,
                    field=name,
                )
        label = obj[field]
        if len(given) == 2 and obj["label"] != label:
            raise DataError(
                f"criteria_met is {json.dumps(label)} but label is {json.dumps(obj['label'])}; give one",
                path=source,
                line=number,
            )
        key = (obj["completion_id"], obj["rubric"])
        if key not in wanted:
            raise DataError(
                f"no meta-eval row has completion_id {key[0]!r} with this rubric", path=source, line=number
            )
        if key in found:
            raise DataError(f"duplicate label for completion_id {key[0]!r}", path=source, line=number)
        found[key] = label
    if not found:
        raise DataError("the file contains no labels", path=source)
    return [found.get((r.completion_id, r.rubric)) for r in records]
