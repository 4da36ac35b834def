"""Offline jobs: nothing is asked of a model. An ``import`` job stores an uploaded simple-evals
``_allresults.json`` as a run (through `store_imported`, the importer of ``healthbench import
--store``), so its result documents are those of any run; a ``meta-eval-labels`` job scores an
uploaded judge label file against the meta-eval dataset: the worker scores it once and stores the
metrics with the job (``job_results``), which every GET then serves. Uploads are read from their
bytes (never written to a file to be read back); errors name the upload field."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from healthbench.data.schema import MetaEvalRecord
from healthbench.data.sources import join_datasets
from healthbench.errors import HealthBenchError
from healthbench.results.meta_results import labelled_rows
from healthbench.results.metrics_out import metrics_document
from healthbench.results.simple_evals import load_allresults
from healthbench.runner.imported import store_imported
from healthbench.scoring.meta import meta_metrics
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample
from healthbench.service.schemas import JobCreate, StatusDetails
from healthbench.service.uploads import upload_digest
from healthbench.store.runs import Store

META_EVAL_VARIANT = "meta_eval"
METRICS = "metrics"  # the result document an offline labels job stores


class UploadError(HealthBenchError):
    """A bad upload; the message names the upload field (never a server path), the line and field."""


@contextmanager
def _as_upload_errors() -> Iterator[None]:
    """Errors of reading the uploads as `UploadError` (the readers name each upload by its field)."""
    try:
        yield
    except HealthBenchError as exc:
        raise UploadError(str(exc)) from None


def _upload(body: JobCreate, field: str) -> tuple[str, bytes] | None:
    """An upload of the body as (its field, its bytes): read as it is, never written to a file."""
    text = getattr(body, field)
    return None if text is None else (field, text.encode("utf-8"))


def imported_samples(body: JobCreate) -> list[GradedSample]:
    """The graded samples of an import job's upload, joined with its dataset (if any) for tags."""
    data = _upload(body, "data_jsonl")
    with _as_upload_errors():
        conversations = join_datasets([data] if data is not None else [], body.dataset)
        text = body.allresults_json or ""  # (an import job's upload, required by JobCreate)
        allresults = load_allresults(
            text.encode("utf-8"), conversations, allow_missing=body.allow_untagged, name="allresults_json"
        )
    return allresults.samples


def _labelled_rows(body: JobCreate) -> tuple[list[MetaEvalRecord], list[bool | None]]:
    """The chosen meta-eval rows of a meta-eval-labels job and their labels from its upload."""
    labels, data = _upload(body, "labels_jsonl"), _upload(body, "data_jsonl")
    with _as_upload_errors():
        return labelled_rows(
            labels[1] if labels is not None else b"",
            META_EVAL_VARIANT,
            data=data[1] if data is not None else None,
            names=("labels_jsonl", "data_jsonl"),
            limit=body.limit,
        )


def label_metrics(body: JobCreate) -> dict[str, Any]:
    """The flat meta-eval metrics of a meta-eval-labels job's label file: computed by the worker,
    once, and stored with the job (`healthbench.store.jobs.JobStore.set_result`)."""
    rows, labels = _labelled_rows(body)
    return metrics_document(meta_metrics(rows, labels).metrics)


def check_offline(body: JobCreate) -> None:
    """Read an offline job's uploads at creation, so that a bad one is refused then (`UploadError`);
    nothing is scored here."""
    if body.kind == "import":
        imported_samples(body)
    elif body.kind == "meta-eval-labels":
        _labelled_rows(body)


def import_details(samples: list[GradedSample]) -> dict[str, Any]:
    verdicts = [v for s in samples for v in s.verdicts]
    ungraded = sum(1 for v in verdicts if v is Verdict.UNGRADED)
    return StatusDetails(
        progress=100.0,
        samples_done=len(samples),
        samples_total=len(samples),
        criteria_done=len(verdicts) - ungraded,
        criteria_total=len(verdicts),
        ungraded=ungraded,
    ).model_dump()


def run_import(
    store: Store, run_name: str, body: JobCreate, drop_run: Callable[[str], None]
) -> dict[str, Any]:
    """Store an import job's upload as the run ``run_name`` and return the job's status details (a
    run left by an interrupted attempt is dropped first: the import is deterministic)."""
    samples = imported_samples(body)
    if store.get_run(run_name) is not None:
        drop_run(run_name)
    digest = upload_digest(body.allresults_json or "")
    store_imported(store, run_name, samples, source={"source": "upload", "sha256": digest})
    return import_details(samples)
