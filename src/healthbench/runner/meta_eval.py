"""Meta-eval runs: the judge grades each meta-eval row's fixed completion against its criterion (shown
as is, no points prefix), through the same engine, store, cache and resume as `run`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from healthbench.config import RunConfig
from healthbench.data.schema import MetaEvalRecord, row_id
from healthbench.data.sources import DownloadProgress, load_meta_eval
from healthbench.data.subset import select
from healthbench.errors import RunError
from healthbench.grading.template import load_template
from healthbench.models.pricing import PriceTable
from healthbench.results.views import RunView
from healthbench.runner.engine import WorkItem
from healthbench.runner.estimate import RoleEstimate, estimate
from healthbench.runner.progress import ProgressSink
from healthbench.runner.run import (
    RunOutcome,
    check_models,
    check_same_settings,
    new_run_name,
    resumed,
    run_to_end,
    stored_record,
)
from healthbench.store.runs import RunRecord, Store


def prepare_meta_eval(
    store: Store, config: RunConfig, name: str, *, download_progress: DownloadProgress | None = None
) -> RunRecord:
    existing = store.get_run(name)
    if existing is not None:
        if existing.kind != "meta_eval":
            raise RunError(f"run {name!r} is a {existing.kind} run, not a meta-eval run")
        check_same_settings(existing, config)
        return existing
    source, records = load_meta_eval(
        config.dataset, data=config.data, cache=config.cache_dir, progress=download_progress
    )
    chosen = select(records, limit=config.limit, ids=config.ids, categories=config.categories)
    dataset = {
        "variant": config.dataset,
        "source": source.source,
        "path": str(source.path),
        "sha256": source.sha256,
        "rows": len(chosen),
    }
    template = load_template(config.grader_template, config.cache_dir)
    record = stored_record(config, kind="meta_eval", dataset=dataset, template_sha=template.sha256)
    check_models(config, with_candidate=False)
    return store.create_run(
        name, "meta_eval", record, [(row_id(r), r.model_dump(mode="json")) for r in chosen]
    )


def meta_work(records: Sequence[MetaEvalRecord], n_repeats: int) -> list[WorkItem]:
    return [
        WorkItem(
            item_id=row_id(r),
            repeat=k,
            messages=tuple({"role": m.role, "content": m.content} for m in r.prompt),
            criteria=(r.rubric,),
            fixed_completion=r.completion,
        )
        for k in range(n_repeats)
        for r in records
    ]


def meta_dry_run(config: RunConfig) -> tuple[int, list[RoleEstimate]]:
    """Rows and the judge calls, tokens and cost a meta-eval run needs (no call is made)."""
    _, records = load_meta_eval(config.dataset, data=config.data, cache=config.cache_dir)
    chosen = select(records, limit=config.limit, ids=config.ids, categories=config.categories)
    rows = estimate(
        meta_work(chosen, config.n_repeats),
        candidate=None,
        answer_tokens=None,
        judge=config.judge.parsed(),
        template=load_template(config.grader_template),
        prices=PriceTable.load(config.prices),
        done_samples=set(),
        done_grades=set(),
    )
    return len(chosen), rows


def run_meta_eval(
    config: RunConfig,
    *,
    store: Store,
    name: str | None = None,
    progress: ProgressSink | None = None,
    environ: Mapping[str, str] | None = None,
    download_progress: DownloadProgress | None = None,
) -> RunOutcome:
    """Start or continue the meta-eval run ``name`` (same settings) and grade every row."""
    run = prepare_meta_eval(
        store,
        config.model_copy(update={"model": None}),
        name or new_run_name("meta"),
        download_progress=download_progress,
    )
    return _finish(store, run, config, progress=progress, environ=environ)


def resume_meta_eval(
    name: str,
    *,
    store: Store,
    overrides: Mapping[str, Any] | None = None,
    progress: ProgressSink | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunOutcome:
    """Continue a meta-eval run with its stored settings (see `healthbench.runner.run.resumed`)."""
    run, config = resumed(name, "meta_eval", store=store, overrides=overrides)
    return _finish(store, run, config, progress=progress, environ=environ)


def _finish(
    store: Store,
    run: RunRecord,
    config: RunConfig,
    *,
    progress: ProgressSink | None,
    environ: Mapping[str, str] | None,
) -> RunOutcome:
    work = meta_work(RunView.of(store, run).meta_records(), config.n_repeats)
    return run_to_end(store, run, config, work, with_candidate=False, progress=progress, environ=environ)
