"""Runs as stages: prepare (data + store), execute (the engine), and the entry points that combine
them. Every kind of run (eval, regrade, meta-eval, baselines) is started, resumed and finished by the
same path (`RunKind`, `finish`): only how a new run is made differs. Every result is then read back
from the store."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypedDict, Unpack

from healthbench.config import HOW_FIELDS, ModelConfig, RunConfig, validate_config
from healthbench.data.schema import Conversation
from healthbench.data.sources import DatasetFile, DownloadProgress, load_conversations, open_conversations
from healthbench.data.subset import Chosen, select, select_pages
from healthbench.errors import RunError, RunExistsError, a_kind
from healthbench.executors.batching import BatchCaller, BatchOptions
from healthbench.executors.grading import EngineOptions, Plan, Todo, fresh_todo
from healthbench.executors.local import Engine
from healthbench.executors.progress import CallObserver, NoProgress, ProgressSink, RunCounters
from healthbench.executors.ray import ray_session, run_plan
from healthbench.grading.template import GraderTemplate, load_template, run_template
from healthbench.models.factory import check_model, create_model
from healthbench.models.limits import ConnectionLimits, ConnectionPool, ManagedModel
from healthbench.models.pricing import PriceTable
from healthbench.models.prompt_cache import CACHING_PROVIDERS
from healthbench.results.views import RunView
from healthbench.runner.estimate import RoleEstimate, estimate
from healthbench.runner.loop import run_async
from healthbench.runner.work import eval_work, samples_answers, stored_plan
from healthbench.store.batches import BatchLedger
from healthbench.store.lease import LEASE_TTL, RunLease
from healthbench.store.runs import INTERRUPTED, RunRecord, RunStatus, Store


@dataclass(frozen=True)
class RunOutcome:
    run: RunRecord
    counters: RunCounters


class RunHooks(TypedDict, total=False):
    """What a caller lends a run: its progress display, the environment API keys are read from (None:
    the process's), and the dataset download's progress."""

    progress: ProgressSink | None
    environ: Mapping[str, str] | None
    download_progress: DownloadProgress | None
    observer: CallObserver | None


def new_run_name(prefix: str = "run") -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(2)}"


def _identity(config: RunConfig) -> dict[str, Any]:
    data = config.model_dump(mode="json", exclude=HOW_FIELDS | {"model", "judge", "judges"})
    data["model"] = config.model.identity() if config.model else None
    data["judge"] = config.judge.identity()
    if config.judges:  # (absent for one judge: the identity of runs stored before panels)
        data["judges"] = [member.identity() for member in config.judges]
    return data


def stored_record(
    config: RunConfig, *, kind: str, dataset: Mapping[str, Any], template_sha: str
) -> dict[str, Any]:
    return {
        "run": config.model_dump(mode="json"),
        "identity": _identity(config),
        "kind": kind,
        "dataset": dict(dataset),
        "grader_template_sha256": template_sha,
    }


def dataset_record(config: RunConfig, source: DatasetFile, **counts: Any) -> dict[str, Any]:
    """What a run stores about its dataset: variant, where it came from, its sha256, and ``counts``."""
    return {
        "variant": config.dataset,
        "source": source.source,
        "path": str(source.path),
        "sha256": source.sha256,
        **counts,
    }


def panel_labels(config: RunConfig) -> tuple[str, ...]:
    """The labels of the run's judges, the chair first (a single judge: a panel of one)."""
    return tuple(member.label for member in config.panel)


def judge_estimate(todo: Iterable[Todo], config: RunConfig) -> list[RoleEstimate]:
    """The judge calls, tokens and cost ``todo`` still needs when its answers are given (no candidate):
    a row per member of the panel."""
    return estimate(
        todo,
        candidate=None,
        answer_tokens=None,
        judges={member.label: member.parsed() for member in config.panel},
        template=load_template(config.grader_template, config.cache_dir),
        prices=PriceTable.load(config.prices),
    )


def check_same_settings(run: RunRecord, config: RunConfig) -> None:
    """Continuing a run by name is only allowed with the settings that define it (the grader
    template's text included, not only its path)."""
    before, after = run.config["identity"], _identity(config)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    template = run_template(
        config.grader_template, config.cache_dir, run.config.get("grader_template_sha256")
    )
    if template.sha256 != run.config.get("grader_template_sha256"):
        changed.append("grader template text")
    if changed:
        raise RunError(
            f"run {run.name!r} exists with different settings ({', '.join(changed)}); "
            f"use `--resume {run.name}` to continue it as it was, or another --name"
        )


def check_models(
    config: RunConfig, *, with_candidate: bool = True, environ: Mapping[str, str] | None = None
) -> None:
    """Fail (ConfigError) before anything is stored when a model cannot be created: a missing API
    key or optional extra leaves no run behind."""
    roles = [config.model] if with_candidate and config.model is not None else []
    specs = [role.parsed() for role in [*roles, *config.panel]]  # every spec parses before any check
    for spec in specs:
        if not (spec.provider == "vllm" and config.executor == "ray"):  # checked by the Ray executor
            check_model(spec, environ)


# -- eval runs -------------------------------------------------------------------------------------
def prepare_eval(store: Store, config: RunConfig, name: str, **hooks: Unpack[RunHooks]) -> RunRecord:
    """The run called ``name``: created with its conversations, or the existing one if compatible. The
    dataset is read a page at a time, twice (`select_pages`): the whole file is checked and the
    conversations chosen before anything is stored, then the chosen ones are streamed into the run."""
    existing = store.get_run(name)
    template = load_template(config.grader_template, config.cache_dir)
    if existing is not None:
        check_same_settings(existing, config)
        return existing
    if config.model is None:
        raise RunError("an eval run needs a candidate model (--model)")
    source, pages = open_conversations(
        config.dataset, data=config.data, cache=config.cache_dir, progress=hooks.get("download_progress")
    )
    chosen: Chosen[Conversation] = select_pages(
        pages.lines, build=pages.build, limit=config.limit, ids=config.ids, themes=config.themes
    )
    dataset = dataset_record(config, source, conversations=chosen.count)
    record = stored_record(config, kind="eval", dataset=dataset, template_sha=template.sha256)
    check_models(config, environ=hooks.get("environ"))
    try:
        return store.create_run(
            name, "eval", record, ((c.prompt_id, c.model_dump(mode="json"), at) for at, c in chosen.rows())
        )
    except RunExistsError:  # another process created it a moment ago: continue it as an existing run
        return prepare_eval(store, config, name, **hooks)


def judge_sees_system(config: RunConfig) -> str | None:
    """The candidate's system message when the judge grades the conversation as sent (see `EngineOptions`)."""
    if not config.judge_sees_system_message or config.model is None:
        return None
    return config.model.settings.system_message


async def execute(
    store: Store,
    run: RunRecord,
    config: RunConfig,
    *,
    progress: ProgressSink | None = None,
    environ: Mapping[str, str] | None = None,
    with_candidate: bool = True,
    pool: ConnectionPool | None = None,
    observer: CallObserver | None = None,
    lease: float = LEASE_TTL,
) -> RunCounters:
    """Run the engine over what is left of ``run`` (`stored_plan`) and record the run's status.
    Models are created (and closed) here. Only one process executes a run at a time: the others get
    a RunError naming the holder (``lease``: seconds without a renewal after which the run's lease
    may be taken over).
    ``pool`` shares one connection budget per endpoint with other runs on the same event loop;
    ``observer`` is told of every model call (service/metrics.py, telemetry.py)."""
    x = _Execution(store, run, config, progress, environ, with_candidate, pool, observer)
    async with RunLease(store, run.id, run.name, ttl=lease).held():
        return await _execute(x)


@dataclass(frozen=True)
class _Execution:
    """One execution of a run (see `execute`)."""

    store: Store
    run: RunRecord
    config: RunConfig
    progress: ProgressSink | None
    environ: Mapping[str, str] | None
    with_candidate: bool
    pool: ConnectionPool | None
    observer: CallObserver | None = None  # told of every model call (metrics, traces)


async def _execute(x: _Execution) -> RunCounters:
    store, run = x.store, x.run
    work_plan = await asyncio.to_thread(stored_plan, store, run, x.config)  # counted by the store
    if work_plan.empty:  # nothing left: no model is created, no call is made
        counters = RunCounters(
            samples_total=work_plan.samples_total,
            samples_done=work_plan.samples_done,
            criteria_total=work_plan.criteria_total,
            criteria_done=work_plan.criteria_done,
        )
        if run.status != RunStatus.FINISHED:
            store.set_status(run.id, RunStatus.FINISHED)
        return counters
    store.set_status(run.id, RunStatus.RUNNING)
    status = RunStatus.FAILED
    try:
        on_executor = _on_ray if x.config.executor == "ray" else _on_engine
        counters = await on_executor(x, work_plan)
        clean = counters.ungraded == 0 and counters.samples_failed == 0
        status = RunStatus.FINISHED if clean else RunStatus.INCOMPLETE
        return counters
    except (asyncio.CancelledError, KeyboardInterrupt):
        status = RunStatus.INTERRUPTED  # everything committed so far is kept; run it again to continue
        raise
    finally:
        store.set_status(run.id, status)


def _engine_options(config: RunConfig) -> EngineOptions:
    return EngineOptions(
        max_connections=config.max_connections,
        judge_retries=config.judge_retries,
        structured_judge=config.structured_judge,
        judge_sees_system=judge_sees_system(config),
        batch_open_items=config.batch_open_items,
        judges=panel_labels(config),
    )


def warms_first(config: RunConfig, template: GraderTemplate) -> frozenset[str]:
    """The members that warm first (`EngineOptions.warm_first`): asked for (``warm_first``, the
    default), with a cache-first grader template, each member whose provider caches prompt prefixes
    (OpenAI and any OpenAI-compatible server, Anthropic), online or with ``--batch`` (then the first
    criteria go in batches of their own, and the rest once those have answered: docs/cost.md)."""
    if not (config.warm_first and template.cache_first):
        return frozenset()
    return frozenset(m.label for m in config.panel if m.parsed().provider in CACHING_PROVIDERS)


async def _on_engine(x: _Execution, work_plan: Plan) -> RunCounters:
    config, environ = x.config, x.environ
    pool = x.pool or ConnectionPool(
        ConnectionLimits(
            max_connections=config.max_connections,
            requests_per_minute=config.requests_per_minute,
            tokens_per_minute=config.tokens_per_minute,
        )
    )
    judges, candidate = _models(config, pool, environ, with_candidate=x.with_candidate)
    template = _template(x)
    engine = Engine(
        x.store,
        x.run.id,
        batcher=_batcher(x, judges, candidate),
        candidate=candidate,
        judges=judges,
        template=template,
        options=dataclasses.replace(_engine_options(config), warm_first=warms_first(config, template)),
        prices=PriceTable.load(config.prices),
        progress=x.progress or NoProgress(),
        pool=pool,
        observer=_observe_retries(x.observer, judges=list(judges.values()), candidate=candidate),
    )
    try:
        return await engine.run(work_plan, interrupted_before=x.run.status in INTERRUPTED)
    finally:
        await _close(judges, candidate)


def _models(
    config: RunConfig, pool: ConnectionPool, environ: Mapping[str, str] | None, *, with_candidate: bool
) -> tuple[dict[str, ManagedModel], ManagedModel | None]:
    """The run's models: each member of the judge panel's (by label, the chair first), each with its own
    limits, retries and settings on the shared connection ``pool``; and the candidate's (None: not
    sampled)."""
    judges = {
        m.label: create_model(m.parsed(), m.settings, pool=pool, policy=config.retry, environ=environ)
        for m in config.panel
    }
    candidate = None
    if with_candidate and config.model is not None:
        candidate = create_model(
            config.model.parsed(), config.model.settings, pool=pool, policy=config.retry, environ=environ
        )
    return judges, candidate


async def _close(judges: Mapping[str, ManagedModel], candidate: ManagedModel | None) -> None:
    for model in (candidate, *judges.values()):
        if model is not None:
            await model.aclose()


def _observe_retries(
    observer: CallObserver | None, *, judges: list[ManagedModel], candidate: ManagedModel | None
) -> CallObserver | None:
    """``observer``, also told of the models' retries (counted by `ManagedModel`)."""
    if observer is not None:
        roles = [("judge", model) for model in judges] + [("candidate", candidate)]
        for role, model in roles:
            if model is not None:
                model.on_retry = functools.partial(observer.call_retried, role, model.spec)
    return observer


def _batcher(
    x: _Execution, judges: Mapping[str, ManagedModel], candidate: ManagedModel | None
) -> Callable[[RunCounters], BatchCaller] | None:
    """With ``--batch``, or when the run has provider batches of an earlier session (resumed with
    another ``--batch``: those are polled and their answers used, see `BatchOptions.poll_roles`): how
    the engine makes its `BatchCaller` (the roles, timing and fallback)."""
    config = x.config
    ledger = BatchLedger(x.store, x.run.id)
    roles = {"none": frozenset(), "judge": frozenset({"judge"})}.get(config.batch, {"judge", "candidate"})
    recorded = ledger.batches()
    if not roles and not recorded:
        return None
    models = {("judge", label): model for label, model in judges.items()}
    if candidate is not None:
        models["candidate", ""] = candidate
    present = {role for role, _ in models}
    options = BatchOptions(
        roles=frozenset(roles),
        poll_roles=frozenset(b.role for b in recorded if b.batch_id is not None and b.role in present)
        - roles,
        fallback=config.batch_fallback,
        poll_interval=config.batch_poll_interval,
        linger=config.batch_linger,
        max_wait=config.batch_max_wait,
        max_retries=config.retry.max_retries,
        max_requests=config.batch_max_requests,
    )
    return lambda counters: BatchCaller(ledger, options, counters, models)


async def cancel_batches(store: Store, name: str, *, environ: Mapping[str, str] | None = None) -> int:
    """Cancel the provider batches of run ``name`` that are still running (a cancelled job); how many.
    The run's answers committed so far are kept."""
    run = store.get_run(name)
    if run is None:
        return 0
    config = RunConfig.model_validate(run.config["run"])
    if not any(b.batch_id for b in BatchLedger(store, run.id).batches()):
        return 0
    pool = ConnectionPool(ConnectionLimits(max_connections=config.max_connections))
    with_candidate = config.model is not None and samples_answers(run, config)
    judges, candidate = _models(config, pool, environ, with_candidate=with_candidate)
    x = _Execution(store, run, config, None, environ, candidate is not None, pool)
    make = _batcher(x, judges, candidate)
    assert make is not None
    try:
        return await make(RunCounters()).cancel_provider_batches()
    finally:
        await _close(judges, candidate)


async def _on_ray(x: _Execution, work_plan: Plan) -> RunCounters:
    """The same plan on Ray (healthbench.executors.ray), off the event loop so the lease stays renewed."""
    return await asyncio.to_thread(
        run_plan,
        x.store,
        x.run.id,
        x.config,
        work_plan,
        options=_engine_options(x.config),
        progress=x.progress,
        environ=x.environ,
        with_candidate=x.with_candidate,
        interrupted_before=x.run.status in INTERRUPTED,
        template=_template(x),
        observer=x.observer,
    )


def _template(x: _Execution) -> GraderTemplate:
    """The run's grader template: a run started with the earlier built-in one keeps it."""
    return run_template(
        x.config.grader_template, x.config.cache_dir, x.run.config.get("grader_template_sha256")
    )


class Prepare(Protocol):
    """How a run kind makes its run ``name``, or takes the existing one with the same settings."""

    def __call__(
        self, store: Store, config: RunConfig, name: str, **hooks: Unpack[RunHooks]
    ) -> RunRecord: ...


@dataclass(frozen=True)
class RunKind:
    """A kind of run as stored (``eval``, ``meta_eval``): only how a new one is made differs; starting,
    resuming and finishing are the same for all."""

    kind: str
    name_prefix: str  # of generated run names
    prepare: Prepare

    def start(
        self, config: RunConfig, *, store: Store, name: str | None = None, **hooks: Unpack[RunHooks]
    ) -> RunOutcome:
        """Start (or continue, with the same settings) the run ``name`` and run it to the end."""
        with on_cluster(config):
            run = self.prepare(store, config, name or new_run_name(self.name_prefix), **hooks)
            return finish(store, run, config, **hooks)

    def resume(
        self,
        name: str,
        *,
        store: Store,
        overrides: Mapping[str, Any] | None = None,
        **hooks: Unpack[RunHooks],
    ) -> RunOutcome:
        """Continue a run with its stored settings (see `continued`)."""
        run, config = self.continued(name, store=store, overrides=overrides)
        with on_cluster(config):
            return finish(store, run, config, **hooks)

    def continued(
        self, name: str, *, store: Store, overrides: Mapping[str, Any] | None = None
    ) -> tuple[RunRecord, RunConfig]:
        """The stored run ``name`` of this kind and its settings for continuing it (see `resumed`):
        `resume` runs it here, a service job on its worker's event loop (`execute`)."""
        return resumed(name, self.kind, store=store, overrides=overrides)


def resumed(
    name: str, kind: str, *, store: Store, overrides: Mapping[str, Any] | None = None
) -> tuple[RunRecord, RunConfig]:
    """A stored run and its settings for continuing it; only the "how" settings may be overridden."""
    run = store.require_run(name)
    if run.kind != kind:
        command = "meta-eval --resume" if run.kind == "meta_eval" else "run --resume"
        raise RunError(f"run {name!r} is {a_kind(run.kind)} run; it is continued by `{command}`")
    bad = sorted(set(overrides or {}) - HOW_FIELDS)
    if bad:
        raise RunError(f"--resume keeps the run's settings; cannot change {', '.join(bad)}")
    merged = {**run.config["run"], **(overrides or {})}
    if (overrides or {}).get("batch") == "none" and "batch_fallback" not in (overrides or {}):
        merged["batch_fallback"] = "retry"  # no new batch: the stored fallback has nothing to apply to
    # the batch settings given are checked as a new run's are (`validate_config`); the stored ones as stored
    given_batch = {"batch", "batch_fallback"} & set(overrides or {})
    config = validate_config(merged) if given_batch else RunConfig.model_validate(merged)
    check_same_settings(run, config)
    return run, config


@contextmanager
def on_cluster(config: RunConfig) -> Iterator[None]:
    """For a ``--executor ray`` run: joined to Ray before the run is stored (a cluster that cannot be
    reached in ``ray_connect_timeout`` leaves no run behind), left when the run ends."""
    if config.executor != "ray":
        yield
        return
    with ray_session(config.ray_address, timeout=config.ray_connect_timeout):
        yield


def finish(store: Store, run: RunRecord, config: RunConfig, **hooks: Unpack[RunHooks]) -> RunOutcome:
    """Do what is left of ``run`` (any kind) on the event loop and return the run as stored afterwards."""
    with_candidate = samples_answers(run, config)
    progress, environ, observer = hooks.get("progress"), hooks.get("environ"), hooks.get("observer")
    counters = run_async(
        execute(
            store,
            run,
            config,
            progress=progress,
            environ=environ,
            with_candidate=with_candidate,
            observer=observer,
        )
    )
    return RunOutcome(store.require_run(run.name), counters)


EVAL = RunKind("eval", "run", prepare_eval)


def run_eval(
    config: RunConfig, *, store: Store, name: str | None = None, **hooks: Unpack[RunHooks]
) -> RunOutcome:
    """Start (or continue, with the same settings) the eval run ``name`` (default generated) and run
    it to the end: sample the candidate, grade every criterion, store everything (`RunKind.start`)."""
    return EVAL.start(config, store=store, name=name, **hooks)


def resume_run(
    name: str, *, store: Store, overrides: Mapping[str, Any] | None = None, **hooks: Unpack[RunHooks]
) -> RunOutcome:
    """Continue the eval run ``name`` with its stored settings; ``overrides`` may change only its
    "how" settings (`RunKind.resume`)."""
    return EVAL.resume(name, store=store, overrides=overrides, **hooks)


def check_answers(store: Store, parent: RunRecord) -> None:
    """A regrade grades answers, it never samples: every conversation of ``parent`` needs one."""
    missing, expected = RunView.of(store, parent).unanswered()
    if missing:
        raise RunError(
            f"run {parent.name!r} has no answer for {missing} of {expected} conversations; finish it "
            f"first (`run --resume {parent.name}` on the same store), then regrade it"
        )


Member = ModelConfig | Mapping[str, Any]  # a judge as given: its config, or a config layer


def regrade_config(
    store: Store,
    source: str,
    judge: Member | Sequence[Member] | None,
    overrides: Mapping[str, Any] | None = None,
    *,
    add_judges: Sequence[Member] = (),
    drop_judges: Sequence[str] = (),
) -> tuple[RunRecord, RunConfig]:
    """The run to regrade and the new run's settings: the parent's, with another judge or panel
    (``judge``: one, or a list: a new panel graded anew), or the parent's panel grown by ``add_judges``
    and shrunk by ``drop_judges`` (labels), whose kept members' grades are copied (see `regrade`)."""
    parent = store.require_run(source)
    if parent.kind != "eval":
        raise RunError(f"run {source!r} is {a_kind(parent.kind)} run; only eval runs can be regraded")
    base = dict(parent.config["run"])
    overrides = dict(overrides or {})
    changes = bool(add_judges or drop_judges)
    profile = overrides.get("profile") is not None
    if changes and (judge is not None or profile):
        raise RunError(
            "--add-judge/--drop-judge change the parent run's panel; --judge and --profile name a new one: "
            "give one or the other"
        )
    members: list[Member] | None = None
    if changes:
        members = _changed_panel(RunConfig.model_validate(base).panel, add_judges, drop_judges)
    elif judge is not None:
        members = [judge] if isinstance(judge, ModelConfig | Mapping) else list(judge)
    if profile:
        for key in ("judge", "judges", "grader_template", "judge_sees_system_message"):
            base.pop(key, None)  # the new profile's, unless overridden below
    elif members is None:
        raise RunError("regrade needs a judge (--judge), a profile (--profile) or --add-judge/--drop-judge")
    base.update(overrides)
    if members is not None:
        given = [
            m.model_dump(mode="json", exclude_unset=True) if isinstance(m, ModelConfig) else dict(m)
            for m in members
        ]
        base.pop("judges", None)
        base["judge"] = given[0]
        if len(given) > 1:
            base["judges"] = given
    return parent, validate_config(base)


def _changed_panel(panel: Sequence[ModelConfig], add: Sequence[Member], drop: Sequence[str]) -> list[Member]:
    """A parent's panel with ``add`` appended and the members labelled ``drop`` left out."""
    labels = [m.label for m in panel]
    unknown = [label for label in drop if label not in labels]
    if unknown:
        raise RunError(f"--drop-judge {unknown[0]}: not a judge of the run (its judges: {', '.join(labels)})")
    kept: list[Member] = [m for m in panel if m.label not in drop]
    kept.extend(add)
    if not kept:
        raise RunError("--drop-judge would leave the run without a judge")
    return kept


def kept_members(parent: RunRecord, config: RunConfig) -> list[str]:
    """The members of ``config``'s panel that are members of ``parent``'s with the same settings:
    whose grades a regrade that grows or shrinks the panel copies."""
    before = {m.label: m.identity() for m in RunConfig.model_validate(parent.config["run"]).panel}
    return [m.label for m in config.panel if before.get(m.label) == m.identity()]


def regrade_dry_run(
    store: Store,
    source: str,
    judge: Member | Sequence[Member] | None,
    overrides: Mapping[str, Any] | None = None,
    *,
    add_judges: Sequence[Member] = (),
    drop_judges: Sequence[str] = (),
) -> tuple[RunConfig, int, list[RoleEstimate]]:
    """The new run's settings, the conversations regraded and the judge calls, tokens and cost the
    regrade of ``source`` needs (no call is made): every criterion of every stored answer, the
    answers' real lengths included, by each member whose grades are not copied (see `regrade`)."""
    parent, config = regrade_config(
        store, source, judge, overrides, add_judges=add_judges, drop_judges=drop_judges
    )
    kept = set(kept_members(parent, config)) if add_judges or drop_judges else set()
    answers = store.sample_progress(parent.id)
    conversations = RunView.of(store, parent).conversations()
    work = [
        dataclasses.replace(w, fixed_completion=answers.get((w.item_id, w.repeat), ""))
        for w in eval_work(conversations, range(config.n_repeats))
    ]
    asked = [label for label in panel_labels(config) if label not in kept]
    return config, len(conversations), judge_estimate(fresh_todo(work, asked), config)


def regrade(
    source: str,
    judge: Member | Sequence[Member] | None,
    *,
    store: Store,
    name: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    add_judges: Sequence[Member] = (),
    drop_judges: Sequence[str] = (),
    **hooks: Unpack[RunHooks],
) -> RunOutcome:
    """Grade another run's samples with another judge (or template, or panel) without re-sampling.

    ``judge`` is a `ModelConfig` or a config layer, or a list of them (a new panel, the chair first;
    None: the judge of the ``profile`` override). A ``profile`` override sets the judge's side of that
    profile; the candidate's stays the parent's. ``add_judges``/``drop_judges`` (labels) instead grow
    or shrink the parent's panel: its kept members' grades are copied, only the new members are asked."""
    parent, config = regrade_config(
        store, source, judge, overrides, add_judges=add_judges, drop_judges=drop_judges
    )
    keep = kept_members(parent, config) if add_judges or drop_judges else []
    with on_cluster(config):
        run = prepare_regrade(
            store, parent, config, name or new_run_name("regrade"), environ=hooks.get("environ"), keep=keep
        )
        return finish(store, run, config, **hooks)


def prepare_regrade(
    store: Store,
    parent: RunRecord,
    config: RunConfig,
    name: str,
    *,
    environ: Mapping[str, str] | None = None,
    keep: Sequence[str] = (),
) -> RunRecord:
    """The regrade run ``name`` of ``parent`` (see `regrade_config`): made with the parent's answers
    (and the grades of its members ``keep``, labels), or the existing one when its settings are the same."""
    existing = store.get_run(name)
    if existing is not None:
        if existing.parent_run != parent.name:
            raise RunError(f"run {name!r} exists and is not a regrade of {parent.name!r}")
        check_same_settings(existing, config)
        return existing
    check_models(config, with_candidate=False, environ=environ)
    check_answers(store, parent)
    template = load_template(config.grader_template, config.cache_dir)
    record = stored_record(
        config, kind="eval", dataset=parent.config["dataset"], template_sha=template.sha256
    )
    return store.create_run(
        name, "eval", record, (), parent_run=parent.name, copy_of=parent.id, copy_grades_of=keep
    )


def dry_run(store: Store, config: RunConfig, name: str | None) -> tuple[int, list[RoleEstimate]]:
    """Conversations and the estimated calls, tokens and cost still needed (no call is made); an
    existing run ``name`` counts only what it has not done yet."""
    existing = store.get_run(name) if name else None
    if existing is not None:  # what is left of it, as the run itself would plan it
        work_plan = stored_plan(store, existing, config)
        n_conversations, todo = work_plan.samples_total // config.n_repeats, work_plan.todo()
    else:
        _, loaded = load_conversations(config.dataset, data=config.data, cache=config.cache_dir)
        conversations = select(loaded, limit=config.limit, ids=config.ids, themes=config.themes)
        n_conversations, todo = (
            len(conversations),
            fresh_todo(eval_work(conversations, range(config.n_repeats)), panel_labels(config)),
        )
    model = config.model
    rows = estimate(
        todo,
        candidate=model.parsed() if model else None,
        answer_tokens=model.settings.max_tokens if model else None,
        judges={member.label: member.parsed() for member in config.panel},
        template=load_template(config.grader_template, config.cache_dir),
        prices=PriceTable.load(config.prices),
    )
    return n_conversations, rows
