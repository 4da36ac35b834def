"""What the service does for one request, without HTTP: the routes (service/app.py) and the
in-process client (`Client.local`) both call `JobService`, so the two give the same answers."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from healthbench.analysis.compare import compare_runs, threshold_problem
from healthbench.analysis.inputs import LoadedRun, load_stored
from healthbench.analysis.report import build_report
from healthbench.analysis.report_judges import stored_judge_choice
from healthbench.config import ModelConfig, RunConfig, build_config, checked_base_url
from healthbench.data.professional import read_conversations
from healthbench.data.schema import MetaEvalRecord
from healthbench.data.sources import read_records
from healthbench.defaults import DEFAULT_STATUS_CACHE
from healthbench.errors import HealthBenchError, StoreError
from healthbench.executors.ray import require_ray
from healthbench.grading.template import GraderTemplate
from healthbench.results.aggregate import aggregate_scores
from healthbench.results.metrics_out import metrics_document, usage_metrics
from healthbench.results.panel_meta_results import meta_run_metrics
from healthbench.results.rows import iter_row_scores
from healthbench.results.run_results import run_metrics, scored_run
from healthbench.results.simple_evals import write_allresults
from healthbench.results.views import RunView
from healthbench.runner.run import check_models, regrade_config
from healthbench.service.errors import ServiceError
from healthbench.service.limits import ServiceLimits
from healthbench.service.offline import META_EVAL_VARIANT, METRICS, UploadError, check_offline, label_metrics
from healthbench.service.schemas import (
    KIND_DOCUMENTS,
    KIND_FIELDS,
    TERMINAL,
    Job,
    JobCreate,
    JobList,
    JobLogs,
    JobStatus,
    LogEntry,
    Page,
    ResultList,
    ResultRef,
    StatusDetails,
)
from healthbench.service.uploads import (
    public_message,
    remove_unused,
    report_path,
    upload_digest,
    upload_path,
    uploads_folder,
    without_flags,
)
from healthbench.store.jobs import ACTIVE, DuplicateJob, JobRecord, JobStore
from healthbench.store.runs import RunRecord, Store

UPLOAD_LABEL = "data_jsonl"
ONLINE_KINDS = ("eval", "regrade", "meta-eval")  # the kinds that call models (and can resume)
REPORT_KINDS = ("eval", "regrade", "import")  # the kinds whose run has a report (an eval run)
# stored apart from the job row (see job_uploads)
UPLOAD_FIELDS = ("data_jsonl", "grader_template", "allresults_json", "labels_jsonl")
MEDIA_TYPES = {
    "aggregate-scores": "application/json",
    "row-scores": "application/jsonl",
    "allresults": "application/json",
    "metrics": "application/json",
}


def job_body(spec: Mapping[str, Any], uploads: Mapping[str, str] | None = None) -> JobCreate:
    """The request body of a job from its stored spec and uploads."""
    return JobCreate.model_validate({k: v for k, v in spec.items() if k != "uploads"} | dict(uploads or {}))


# JobCreate's fields that are also RunConfig's (same names, same meaning), but for the grader
# template, which a job uploads as text (`job_layer` writes it to a file and passes its path)
SHARED_FIELDS = frozenset(JobCreate.model_fields) & frozenset(RunConfig.model_fields) - {"grader_template"}


def job_layer(body: JobCreate, folder: Path) -> dict[str, Any]:
    """The run-config layer of a job's body: the fields it shares with `RunConfig`, the uploads as
    their files in the store's upload ``folder``, ``max_retries`` as the retry policy's (unset ones
    left out)."""
    layer = body.model_dump(mode="json", by_alias=False, include=set(SHARED_FIELDS), exclude_none=True)
    if body.data_jsonl is not None:
        layer["data"] = str(upload_path(folder, body.data_jsonl, "data_jsonl"))
    if body.grader_template is not None:
        layer["grader_template"] = str(upload_path(folder, body.grader_template, "grader_template"))
    if body.max_retries is not None:
        layer["retry"] = {"max_retries": body.max_retries}
    return layer


def job_config(spec: Mapping[str, Any], uploads: Mapping[str, str] | None, folder: Path) -> RunConfig:
    """The run config of an eval or meta-eval job's stored request body and uploads (written back to
    their files in the store's upload ``folder``), resolved by `build_config` as the CLI's and the
    Python API's are."""
    body = job_body(spec, uploads)
    if body.kind != "meta-eval":
        return build_config(job_layer(body, folder))
    config = build_config(job_layer(body, folder), defaults={"dataset": META_EVAL_VARIANT})
    return config.model_copy(update={"model": None})  # no candidate (as `run_meta_eval` makes it)


def regrade_overrides(
    spec: Mapping[str, Any], uploads: Mapping[str, str] | None, folder: Path
) -> dict[str, Any]:
    """The settings a regrade job changes in its source run's config (see `regrade_config`): its
    judge side; the source's ray_address goes with its executor unless the job names one."""
    layer = job_layer(job_body(spec, uploads), folder)
    refused = KIND_FIELDS["regrade"][1]  # the source's: its data, candidate and repeats
    return {"ray_address": None} | {k: v for k, v in layer.items() if k not in refused}


def regrade_job_config(
    store: Store, workspace: str, spec: Mapping[str, Any], uploads: Mapping[str, str] | None, folder: Path
) -> tuple[RunRecord, RunConfig]:
    """The source run of a regrade job and the new run's settings, resolved by `regrade_config` as
    `healthbench regrade` resolves them (the job's judge, else its profile's)."""
    overrides = regrade_overrides(spec, uploads, folder)
    source = run_name_of(workspace, spec["source"])
    judge, panel = overrides.pop("judge", None), overrides.pop("judges", None)
    return regrade_config(store, source, panel or judge, overrides)


def _members(config: RunConfig) -> list[tuple[str, ModelConfig]]:
    """The run's judges as a job body names them: ``judge``, or each of ``judges``."""
    if not config.judges:
        return [("judge", config.judge)]
    return [(f"judges[{i}]", member) for i, member in enumerate(config.judges)]


def _validate(config: RunConfig, body: JobCreate) -> None:
    """Fail at creation, not later in a worker: models must parse, uploaded data must read (from the
    upload's bytes, so that errors name the upload field, never a server path)."""
    for field, role in (("model", config.model), *_members(config)):
        if role is not None:
            _parsed(field, role)
    if body.data_jsonl is None:
        return
    data = body.data_jsonl.encode("utf-8")
    try:
        if body.kind == "meta-eval":
            read_records(data, MetaEvalRecord, name=UPLOAD_LABEL)
        else:
            read_conversations(data, name=UPLOAD_LABEL)
    except HealthBenchError as exc:
        raise ServiceError(422, str(exc)) from None


def _parsed(field: str, role: ModelConfig) -> None:
    """Refuse a role whose spec (with its base_url) does not parse, naming the field."""
    try:
        role.parsed()
    except HealthBenchError as exc:
        raise ServiceError(422, f"{field}: {without_flags(str(exc))}") from None


def run_name_of(workspace: str, name: str) -> str:
    return f"{workspace}/{name}"  # names never contain "/": unique across workspaces


def details_of_record(status: str, details: dict[str, Any]) -> StatusDetails:
    """A job's stored progress as the API shows it: a cancelled or completed job has no provider
    batch running (its last progress line may still name one as ``in_progress``)."""
    shown = StatusDetails.model_validate(details)
    if status in ("cancelled", "completed") and shown.batches is not None:
        shown = shown.model_copy(update={"batches": None})
    return shown


def to_job(record: JobRecord) -> Job:
    return Job(
        id=record.id,
        name=record.name,
        workspace=record.workspace,
        status=record.status,  # type: ignore[arg-type]
        status_details=details_of_record(record.status, record.details),
        error=record.error,
        description=record.spec.get("description"),
        spec=record.spec,
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _no_job(workspace: str, name: str) -> ServiceError:
    return ServiceError(404, f"no job named {name!r} in workspace {workspace!r}")


STATUS_CACHE_ENTRIES = 1024  # jobs whose status a process remembers; past it, it forgets them all


class JobService:
    """Job operations scoped to a workspace; raises `ServiceError` for every refusal.

    A job's status is read from the store at most once per ``status_cache`` seconds in this
    process: a burst of polls costs one read. What this process changes (create, cancel, resume,
    delete) shows at once; what a worker writes (progress, its end) shows within ``status_cache``
    seconds, well inside the half second between its progress writes."""

    def __init__(
        self,
        store: Store,
        limits: ServiceLimits | None = None,
        status_cache: float = DEFAULT_STATUS_CACHE,
    ) -> None:
        self.store = store
        self.jobs = JobStore(store)
        self.limits = limits or ServiceLimits()
        self.folder = uploads_folder(store)
        self._status_ttl = status_cache
        self._statuses: dict[tuple[str, str], tuple[float, JobStatus]] = {}

    def public(self, message: str, uploads: Mapping[str, str] | None = None) -> str:
        """``message`` without server paths or command-line flags (see `public_message`)."""
        return public_message(message, self.folder, self.store.url, uploads)

    def _job(self, workspace: str, name: str) -> JobRecord:
        record = self.jobs.get(workspace, name)
        if record is None:
            raise _no_job(workspace, name)
        return record

    def create(self, workspace: str, body: JobCreate) -> Job:
        name = body.name or f"job-{secrets.token_hex(6)}"
        body = body.model_copy(update={"name": name})
        uploads = {f: getattr(body, f) for f in UPLOAD_FIELDS if getattr(body, f) is not None}
        panel = [(f"judges[{i}]", ref) for i, ref in enumerate(body.judges or [])]
        for field, ref in (("model", body.model), ("judge", body.judge), *panel):
            if ref is not None and ref.base_url is not None:
                try:  # the rule of every entry point (a flag, a config file), before the allow list
                    checked_base_url(ref.base_url)
                except ValueError as exc:
                    raise ServiceError(422, f"{field}.base_url: {exc}") from None
            self.limits.check_model(field, ref)
        self.limits.check_ray_address(body.ray_address)
        self.limits.check_quota(workspace, self.jobs.usage(workspace), sum(len(t) for t in uploads.values()))
        try:
            self._check(workspace, body, uploads)
        except BaseException as exc:
            self._release(uploads.values())  # a refused job leaves no file
            if isinstance(exc, HealthBenchError) and not isinstance(exc, ServiceError):
                raise ServiceError(422, self.public(str(exc), uploads)) from None
            if isinstance(exc, ValidationError):  # the run config refuses settings of its executor
                message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
                raise ServiceError(422, f"executor: {self.public(message, uploads)}") from None
            raise
        spec = body.model_dump(mode="json", exclude_none=True, exclude=set(UPLOAD_FIELDS))
        if uploads:  # shown as their SHA-256 (the text is kept in its own table)
            spec["uploads"] = {f: upload_digest(t) for f, t in uploads.items()}
        if self.jobs.get(workspace, name) is not None:
            raise ServiceError(409, f"a job named {name!r} already exists in workspace {workspace!r}")
        try:
            record = self.jobs.create(
                secrets.token_hex(12), workspace, name, spec, run_name_of(workspace, name), uploads
            )
        except DuplicateJob:
            self._release(uploads.values())
            raise ServiceError(
                409, f"a job named {name!r} already exists in workspace {workspace!r}"
            ) from None
        self._changed(workspace, name)
        return to_job(record)

    def _check(self, workspace: str, body: JobCreate, uploads: Mapping[str, str]) -> None:
        """Everything a job needs, checked before it is stored (a worker would fail it later)."""
        if body.grader_template is not None:
            try:
                GraderTemplate(body.grader_template.strip(), "text")
            except HealthBenchError as exc:
                raise ServiceError(422, f"grader_template: {exc}") from None
        if body.executor == "ray":
            try:
                require_ray()
            except HealthBenchError as exc:
                raise ServiceError(422, f"executor: {exc}") from None
        if body.kind in ("eval", "meta-eval"):
            config = job_config(
                body.model_dump(mode="json", exclude=set(UPLOAD_FIELDS)), uploads, self.folder
            )
            _validate(config, body)
            self._usable("model", config.model, body.executor)
            for field, member in _members(config):
                self._usable(field, member, body.executor)
        elif body.kind == "regrade":
            self._check_source(workspace, body)
            spec = body.model_dump(mode="json", exclude=set(UPLOAD_FIELDS))
            try:
                _, config = regrade_job_config(self.store, workspace, spec, uploads, self.folder)
            except StoreError:
                raise  # the store did not answer: a 503 (app.py), not the job's fault
            except HealthBenchError as exc:
                raise ServiceError(422, f"judge: {without_flags(str(exc))}") from None
            for field, member in _members(config):  # the job's or its profile's (JobCreate checks)
                _parsed(field, member)
                self._usable(field, member, body.executor)
        else:
            try:
                check_offline(body)
            except UploadError as exc:
                raise ServiceError(422, str(exc)) from None

    def _usable(self, field: str, role: ModelConfig | None, executor: str) -> None:
        """422 naming the field when a run could not create the role's model (its key or extra
        missing from the service's environment), as `check_models` finds before a run is stored."""
        if role is None:
            return
        try:
            check_models(RunConfig(judge=role, executor=executor), with_candidate=False)  # type: ignore[arg-type]
        except HealthBenchError as exc:
            raise ServiceError(422, f"{field}: {self.public(str(exc))}") from None

    def _release(self, texts: Iterable[str]) -> None:
        """Remove the upload files of ``texts`` that no stored job uses."""
        remove_unused(self.folder, [upload_digest(t) for t in texts], self.jobs.upload_in_use)

    def _check_source(self, workspace: str, body: JobCreate) -> None:
        """A regrade's source must be a completed job with answers."""
        assert body.source is not None  # JobCreate checks it
        source = self.jobs.get(workspace, body.source)
        if source is None:
            raise ServiceError(422, f"source: no job named {body.source!r} in workspace {workspace!r}")
        kind = source.spec.get("kind", "eval")
        if kind not in ("eval", "regrade", "import") or source.status != "completed":
            raise ServiceError(
                422,
                f"source: job {body.source!r} is a {source.status} {kind} job; a regrade needs a "
                "completed eval, regrade or import job",
            )

    def list(
        self,
        workspace: str,
        *,
        status: str | None,
        offset: int,
        limit: int,
        newest_first: bool = False,
        name_contains: str | None = None,
    ) -> JobList:
        records, total = self.jobs.list(
            workspace,
            status=status,
            offset=offset,
            limit=limit,
            newest_first=newest_first,
            name_contains=name_contains,
        )
        return JobList(
            data=[to_job(r) for r in records], pagination=Page(offset=offset, limit=limit, total=total)
        )

    def retrieve(self, workspace: str, name: str) -> Job:
        return to_job(self._job(workspace, name))

    def status(self, workspace: str, name: str) -> JobStatus:
        now = time.monotonic()
        hit = self._statuses.get((workspace, name))
        if hit is not None and now - hit[0] < self._status_ttl:
            return hit[1]
        record = self.jobs.status(workspace, name)
        if record is None:
            raise _no_job(workspace, name)
        status = JobStatus(
            name=record.name,
            workspace=record.workspace,
            status=record.status,  # type: ignore[arg-type]
            status_details=details_of_record(record.status, record.details),
            error=record.error,
        )
        if len(self._statuses) >= STATUS_CACHE_ENTRIES:
            self._statuses.clear()
        self._statuses[(workspace, name)] = (now, status)
        return status

    def _changed(self, workspace: str, name: str) -> None:
        """Forget the remembered status of a job this process just changed."""
        self._statuses.pop((workspace, name), None)

    def logs(self, workspace: str, name: str) -> JobLogs:
        return JobLogs(data=[LogEntry.model_validate(e) for e in self._job(workspace, name).logs])

    def cancel(self, workspace: str, name: str) -> Job:
        record = self._job(workspace, name)
        if record.status in TERMINAL:
            raise ServiceError(409, f"job {name!r} is already {record.status}")
        if self.jobs.set_status(
            record.id, "cancelled", expect=("created", "pending")
        ) or self.jobs.set_status(record.id, "cancelling", expect=("active",)):
            self.jobs.log(record.id, "cancel requested")
        self._changed(workspace, name)
        return self.retrieve(workspace, name)

    def resume(self, workspace: str, name: str) -> Job:
        """Queue a finished online job again so that its worker does what it left undone: criteria
        left ungraded, conversations never answered, what a failed or cancelled attempt did not reach.
        The worker continues the job's run as `healthbench run --resume` does (`RunKind.continued`):
        only what is missing is asked again."""
        record = self._job(workspace, name)
        kind = record.spec.get("kind", "eval")
        if kind not in ONLINE_KINDS:
            raise ServiceError(409, f"job {name!r} is an offline {kind} job; it has nothing to resume")
        if record.status not in TERMINAL:
            raise ServiceError(
                409, f"job {name!r} is {record.status}; only a completed, error or cancelled job resumes"
            )
        details = StatusDetails.model_validate(record.details)
        if record.status == "completed" and not (details.ungraded or details.samples_failed):
            raise ServiceError(409, f"job {name!r} is completed with nothing left to do")
        if not self.jobs.set_status(record.id, "pending", expect=(record.status,), clear_error=True):
            raise ServiceError(409, f"job {name!r} changed while it was being resumed; try again")
        self.jobs.log(record.id, f"resume requested (was {record.status})")
        self._changed(workspace, name)
        return self.retrieve(workspace, name)

    def delete(self, workspace: str, name: str) -> None:
        record = self._job(workspace, name)
        if record.status in ACTIVE:
            raise ServiceError(409, f"job {name!r} is {record.status}; cancel it and wait before deleting it")
        self.jobs.delete(record)
        self._changed(workspace, name)
        digests = record.spec.get("uploads", {}).values()
        remove_unused(self.folder, digests, self.jobs.upload_in_use)
        report = report_path(self.folder, record.id, record.updated_at)
        report.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the folder goes with its last report
            report.parent.rmdir()

    # -- results ----------------------------------------------------------------------------------
    def _completed(self, workspace: str, name: str, document: str) -> JobRecord:
        record = self._job(workspace, name)
        if record.status != "completed":
            raise ServiceError(409, f"job {name!r} is {record.status}; results exist once it is completed")
        kind = record.spec.get("kind", "eval")
        if document not in KIND_DOCUMENTS[kind]:
            raise ServiceError(404, f"job {name!r} ({kind}) has no {document} result")
        return record

    def _finished_run(self, workspace: str, name: str, document: str) -> RunRecord:
        record = self._completed(workspace, name, document)
        run = self.store.get_run(record.run_name)
        if run is None:
            raise ServiceError(404, f"job {name!r} has no stored run")
        return run

    def results(self, workspace: str, name: str) -> ResultList:
        record = self._job(workspace, name)
        names = KIND_DOCUMENTS[record.spec.get("kind", "eval")] if record.status == "completed" else ()
        return ResultList(data=[ResultRef(name=n, media_type=MEDIA_TYPES[n]) for n in names])

    def metrics(self, workspace: str, name: str) -> dict[str, Any]:
        record = self._completed(workspace, name, "metrics")
        if record.spec.get("kind") == "meta-eval-labels":  # scored once by the worker, stored
            stored = self.jobs.result(record.id, METRICS)
            if stored is None:  # a job completed before results were stored (migration 0007): once
                stored = label_metrics(job_body(record.spec, self.jobs.uploads(record.id)))
                self.jobs.set_result(record.id, METRICS, stored)
            return stored
        run = self._finished_run(workspace, name, "metrics")
        view = RunView.of(self.store, run)
        if record.spec.get("kind") == "meta-eval":
            # as `meta-eval --metrics-out`: the judges' figures, then their cost and tokens
            return metrics_document(
                meta_run_metrics(self.store, run),
                usage_metrics(None, view.usage_totals().judge),
                provenance=view.provenance(),
            )
        # the figures `healthbench results NAME` shows and the run's cost and tokens (as `--metrics-out`)
        return run_metrics(view, scored_run(view, with_samples=False))

    def allresults_file(self, workspace: str, name: str, folder: Path) -> Path:
        """The simple-evals ``_allresults.json`` of the job, written into ``folder``."""
        view = RunView.of(self.store, self._finished_run(workspace, name, "allresults"))
        scored = scored_run(view)
        return write_allresults(
            folder / f"{name}_allresults.json",
            scored.samples,
            scored.score,
            provenance=view.provenance(),
            members=scored.members,
        )

    def aggregate_scores(self, workspace: str, name: str) -> dict[str, Any]:
        run = self._finished_run(workspace, name, "aggregate-scores")
        document = aggregate_scores(self.store, run.name)
        return {**document, "job": name}

    def row_scores(self, workspace: str, name: str) -> Iterator[dict[str, Any]]:
        run = self._finished_run(workspace, name, "row-scores")
        return iter(iter_row_scores(self.store, run.name))

    # -- pages ------------------------------------------------------------------------------------
    def _loaded_run(self, workspace: str, name: str, field: str | None = None) -> tuple[JobRecord, LoadedRun]:
        """A completed job's run as the analysis reads it; ``field`` names the request parameter that
        gave the job (its refusals then start with it)."""
        where = f"{field}: " if field else ""
        record = self.jobs.get(workspace, name)
        if record is None:
            raise ServiceError(404, f"{where}no job named {name!r} in workspace {workspace!r}")
        kind = record.spec.get("kind", "eval")
        if record.status != "completed":
            raise ServiceError(409, f"{where}job {name!r} is {record.status}; it has a report once completed")
        if kind not in REPORT_KINDS:
            raise ServiceError(404, f"{where}job {name!r} ({kind}) has no report")
        run = self.store.get_run(record.run_name)
        if run is None:
            raise ServiceError(404, f"{where}job {name!r} has no stored run")
        try:
            return record, load_stored(self.store, run)
        except StoreError:
            raise  # the store did not answer: a 503 (app.py), not a state of the job
        except HealthBenchError as exc:
            raise ServiceError(409, f"{where}{exc}") from None

    def report_file(self, workspace: str, name: str) -> Path:
        """The HTML report of a completed job (what `healthbench report` writes for its run): built
        on the first request and kept (`report_path`), not rebuilt per view."""
        meta = self.jobs.get(workspace, name)
        if meta is not None and meta.spec.get("kind") == "meta-eval" and meta.status == "completed":
            return self._meta_eval_report(meta)
        record, run = self._loaded_run(workspace, name)
        path = report_path(self.folder, record.id, record.updated_at)
        if not path.exists():
            path.parent.mkdir(mode=0o700, exist_ok=True)
            build_report([run], title=f"HealthBench report: job {name}").write(path)
        return path

    def _meta_eval_report(self, record: JobRecord) -> Path:
        """A completed meta-eval job's report: its judges' "Which judge to pay for" (as `healthbench
        report META_RUN` writes it), kept as an eval job's is."""
        path = report_path(self.folder, record.id, record.updated_at)
        if not path.exists():
            run = self.store.get_run(record.run_name)
            if run is None:
                raise ServiceError(404, f"job {record.name!r} has no stored run")
            choices = [stored_judge_choice(self.store, run)]
            path.parent.mkdir(mode=0o700, exist_ok=True)
            title = f"HealthBench meta-eval: job {record.name}"
            build_report([], title=title, judge_choices=choices).write(path)
        return path

    def comparison_html(
        self,
        workspace: str,
        name: str,
        baseline: str,
        *,
        fail_if_worse_by: float | None = None,
        require_non_inferiority: float | None = None,
    ) -> str:
        """The paired comparison of job ``name`` (B) against job ``baseline`` (A), as `healthbench
        compare` decides it (gates included), laid out as the report of the two runs; a threshold
        is checked as `compare` checks it, and a job against itself is warned of as there."""
        for option, value in (
            ("fail_if_worse_by", fail_if_worse_by),
            ("require_non_inferiority", require_non_inferiority),
        ):
            if value is not None and (problem := threshold_problem(value)) is not None:
                raise ServiceError(422, f"query.{option}: {problem}")
        _, a = self._loaded_run(workspace, baseline, field="baseline")
        _, b = self._loaded_run(workspace, name)
        try:
            comparison = compare_runs(a, b)
        except HealthBenchError as exc:  # nothing to pair
            raise ServiceError(409, f"baseline: {exc}") from None
        gates = comparison.gates(
            fail_if_worse_by=fail_if_worse_by, require_non_inferiority=require_non_inferiority
        )
        title = f"HealthBench comparison: job {name} against job {baseline}"
        return build_report([a, b], title=title, comparison=comparison, gates=gates).html()
