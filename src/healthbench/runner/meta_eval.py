"""Meta-eval runs: the judge grades each meta-eval row's fixed completion against its criterion (shown
as is, no points prefix), through the same engine, store, cache, resume and finish as `run`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from healthbench.config import RunConfig
from healthbench.data.schema import MetaEvalRecord, row_id
from healthbench.data.sources import load_meta_eval, open_meta_eval
from healthbench.data.subset import Chosen, select, select_pages
from healthbench.errors import RunError, a_kind
from healthbench.executors.grading import fresh_todo
from healthbench.grading.template import load_template
from healthbench.runner.estimate import RoleEstimate
from healthbench.runner.run import (
    RunHooks,
    RunKind,
    RunOutcome,
    check_models,
    check_same_settings,
    dataset_record,
    judge_estimate,
    panel_labels,
    stored_record,
)
from healthbench.runner.work import meta_work
from healthbench.store.runs import RunRecord, Store


def prepare_meta_eval(store: Store, config: RunConfig, name: str, **hooks: Unpack[RunHooks]) -> RunRecord:
    """The meta-eval run ``name``: created with its rows (the judge is the only model), or the existing
    one with the same settings. The file is read a page at a time (`select_pages`, as `prepare_eval`)."""
    config = config.model_copy(update={"model": None})
    existing = store.get_run(name)
    if existing is not None:
        if existing.kind != "meta_eval":
            raise RunError(f"run {name!r} is {a_kind(existing.kind)} run, not a meta-eval run")
        check_same_settings(existing, config)
        return existing
    source, pages = open_meta_eval(
        config.dataset, data=config.data, cache=config.cache_dir, progress=hooks.get("download_progress")
    )
    chosen: Chosen[MetaEvalRecord] = select_pages(
        pages.lines, build=pages.build, limit=config.limit, ids=config.ids, categories=config.categories
    )
    dataset = dataset_record(config, source, rows=chosen.count)
    template = load_template(config.grader_template, config.cache_dir)
    record = stored_record(config, kind="meta_eval", dataset=dataset, template_sha=template.sha256)
    check_models(config, with_candidate=False, environ=hooks.get("environ"))
    return store.create_run(
        name, "meta_eval", record, ((row_id(r), r.model_dump(mode="json"), at) for at, r in chosen.rows())
    )


def meta_dry_run(config: RunConfig) -> tuple[int, list[RoleEstimate]]:
    """Rows and the judge calls, tokens and cost a meta-eval run needs (no call is made)."""
    _, records = load_meta_eval(config.dataset, data=config.data, cache=config.cache_dir)
    chosen = select(records, limit=config.limit, ids=config.ids, categories=config.categories)
    work = meta_work(chosen, range(config.n_repeats))
    rows = judge_estimate(fresh_todo(work, panel_labels(config)), config)
    return len(chosen), rows


META_EVAL = RunKind("meta_eval", "meta", prepare_meta_eval)


def run_meta_eval(
    config: RunConfig, *, store: Store, name: str | None = None, **hooks: Unpack[RunHooks]
) -> RunOutcome:
    """Start (or continue, with the same settings) the meta-eval run ``name`` (default generated) and
    run it to the end: the judge grades every row's fixed completion (`RunKind.start`)."""
    return META_EVAL.start(config, store=store, name=name, **hooks)


def resume_meta_eval(
    name: str, *, store: Store, overrides: Mapping[str, Any] | None = None, **hooks: Unpack[RunHooks]
) -> RunOutcome:
    """Continue the meta-eval run ``name`` with its stored settings (`RunKind.resume`)."""
    return META_EVAL.resume(name, store=store, overrides=overrides, **hooks)
