"""Meta-eval results: judge labels read back from the store (or from a file made elsewhere) and the
agreement metrics of `healthbench.scoring.meta` computed on them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from healthbench.data.schema import MetaEvalRecord, decode_lines, load_json_line, row_id
from healthbench.data.sources import load_meta_eval
from healthbench.data.subset import select
from healthbench.defaults import DEFAULT_MIN_PHYSICIAN_RATINGS
from healthbench.errors import DataError
from healthbench.results.views import RunView
from healthbench.scoring.meta import MetaEvalResult, meta_metrics
from healthbench.store.runs import RunRecord, Store


def stored_labels(store: Store, run: RunRecord) -> tuple[list[MetaEvalRecord], list[bool | None]]:
    """Rows (repeated ``n_repeats`` times) and the judge's label on each (None = ungraded)."""
    view = RunView.of(store, run).require_kind("meta_eval")
    records = view.meta_records()
    grades = store.grade_progress(run.id)
    rows: list[MetaEvalRecord] = []
    labels: list[bool | None] = []
    for repeat in range(view.config.n_repeats):
        for record in records:
            status, _ = grades.get((row_id(record), repeat, 0), ("ungraded", 0))
            rows.append(record)
            labels.append(None if status == "ungraded" else status == "met")
    return rows, labels


def score_meta_run(
    store: Store, run: RunRecord, *, min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS
) -> MetaEvalResult:
    rows, labels = stored_labels(store, run)
    return meta_metrics(rows, labels, min_physician_ratings=min_physician_ratings)


def score_label_file(
    labels: Path,
    variant: str,
    *,
    data: str | Path | None = None,
    cache: str | Path | None = None,
    limit: int | None = None,
    categories: Sequence[str] | None = None,
    min_physician_ratings: int = DEFAULT_MIN_PHYSICIAN_RATINGS,
) -> MetaEvalResult:
    """Agreement metrics of judge labels made elsewhere (`read_labels`) on the meta-eval rows of
    ``variant`` (or ``data``), chosen by ``limit`` and ``categories`` as a meta-eval run chooses them."""
    _, records = load_meta_eval(variant, data=data, cache=cache)
    chosen = select(records, limit=limit, categories=categories)
    every = {(r.completion_id, r.rubric): r for r in records}
    found = read_labels(labels, list(every.values()))  # a label checked against every row, then chosen
    by_key = dict(zip(every, found, strict=True))
    chosen_labels = [by_key[(r.completion_id, r.rubric)] for r in chosen]
    if all(label is None for label in chosen_labels):
        raise DataError(
            f"none of the {len(chosen)} rows chosen (--limit, --category) has a label in this file",
            path=str(labels),
        )
    return meta_metrics(chosen, chosen_labels, min_physician_ratings=min_physician_ratings)


def read_labels(path: Path, records: Sequence[MetaEvalRecord]) -> list[bool | None]:
    """Judge labels produced elsewhere: JSONL lines ``{"completion_id", "rubric", "criteria_met"}``
    (``label`` is accepted for ``criteria_met``). Rows without a label are ungraded; a label for a row
    that is not in the dataset, a duplicate, or a non-boolean label is an error naming the line."""
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(exc.strerror or "cannot read file", path=source) from None
    wanted = {(r.completion_id, r.rubric) for r in records}
    found: dict[tuple[str, str], bool] = {}
    for number, line in enumerate(decode_lines(data, source=source), start=1):
        if not line.strip():
            continue
        obj = load_json_line(line, source=source, line_number=number)
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
