"""Baselines: the dataset's own completions graded by the judge instead of a candidate model's.

simple-evals grades the physicians' ideal completions (``--run_mode=physician_completions``) and the
four reference model completions the physicians saw (``physician_completion_references``), one
physician group at a time. The rows carry them in ``ideal_completions_data``. Rows are chosen as
simple-evals does: the rows of the group, each expanded to its completion(s) (4 references per row),
then ``--limit`` draws ``random.Random(0).sample`` from the expanded list.

A baseline run is an ordinary eval run (same engine, cache, store, resume, scores and exports) whose
completions are written into the store when the run is created, so the engine only grades. One run
per group: ``<name>-<short group name>`` when no ``--group`` is given.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Unpack

from healthbench.config import RunConfig
from healthbench.data.schema import Conversation
from healthbench.data.sources import DatasetFile, Pages, load_conversations, open_conversations
from healthbench.data.subset import Chosen, select, select_pages
from healthbench.errors import ConfigError, DataError, RunError
from healthbench.executors.grading import Todo, fresh_todo
from healthbench.grading.template import load_template
from healthbench.runner.estimate import RoleEstimate
from healthbench.runner.run import (
    RunHooks,
    RunOutcome,
    check_same_settings,
    dataset_record,
    finish,
    judge_estimate,
    new_run_name,
    on_cluster,
    panel_labels,
    stored_record,
)
from healthbench.runner.work import eval_work, stored_plan
from healthbench.store.runs import RunRecord, SampleRow, Store

PHYSICIAN = "physician"
REFERENCES = "references"
REFERENCES_PER_ROW = 4  # simple-evals asserts four reference completions per row
_SAMPLES_PAGE = 500  # completions written to the store at a time


@dataclass(frozen=True)
class Group:
    """A physician group of the HealthBench rows (simple-evals' PHYSICIAN_COMPLETION_MODES)."""

    name: str  # as the rows write it in ideal_completions_group
    short_name: str
    has_references: bool
    description: str


GROUPS: tuple[Group, ...] = (
    Group("Group 1", "no_reference", False, "physicians wrote without reference completions"),
    Group("Group 2", "aug_2024_reference", True, "physicians saw Aug/Sep 2024 model completions"),
    Group("Group 3", "apr_2025_reference", True, "physicians saw Apr 2025 model completions"),
    Group("professional", "professional", False, "HealthBench Professional physician responses"),
)


def find_group(text: str) -> Group:
    """A group by its name ("Group 1"), number ("1") or short name ("no_reference")."""
    wanted = text.strip().lower()
    for group in GROUPS:
        if wanted in (group.name.lower(), group.short_name, group.name.lower().removeprefix("group ")):
            return group
    known = ", ".join(f"{g.name!r} ({g.short_name})" for g in GROUPS)
    raise ConfigError(f"unknown physician group {text!r}; known: {known}")


@dataclass(frozen=True)
class BaselineRow:
    """One completion to grade: a dataset row, which of its completions, and the text."""

    conversation: Conversation
    completion: str
    item_id: str
    example_tags: list[str] = field(default_factory=list)

    @property
    def prompt_id(self) -> str:
        return self.conversation.prompt_id


@dataclass(frozen=True)
class Selection:
    rows: list[BaselineRow]  # the completions (empty after a run's set-up, which only counts them)
    matching: int  # dataset rows of the group
    skipped: int  # dataset rows without completions for the group
    completions: int  # completions of the group (before --limit, --ids, --theme)


def baseline_rows(conversations: Sequence[Conversation], mode: str, group: Group) -> Selection:
    """The completions of ``group`` to grade in ``mode`` (physician or references), in dataset order."""
    if mode not in (PHYSICIAN, REFERENCES):
        raise ConfigError(f"--completions must be {PHYSICIAN} or {REFERENCES}, got {mode!r}")
    if mode == REFERENCES and not group.has_references:
        raise ConfigError(f"{group.name} ({group.short_name}) has no reference completions")
    matching = [c for c in conversations if _group_of(c) == group.name]
    rows: list[BaselineRow] = []
    for conversation in matching:
        data = conversation.ideal_completions_data or {}
        tags = list(conversation.example_tags)
        if mode == PHYSICIAN:
            text = data.get("ideal_completion")
            if isinstance(text, str):
                rows.append(BaselineRow(conversation, text, conversation.prompt_id, tags))
            continue
        references = data.get("ideal_completions_ref_completions")
        if isinstance(references, list) and len(references) == REFERENCES_PER_ROW:
            rows.extend(
                BaselineRow(conversation, text, f"{conversation.prompt_id}#ref{k}", tags)
                for k, text in enumerate(references)
                if isinstance(text, str)
            )
    kept = {row.prompt_id for row in rows}
    return Selection(rows, len(matching), len(matching) - len(kept), len(rows))


def _group_of(conversation: Conversation) -> str | None:
    data = conversation.ideal_completions_data
    group = data.get("ideal_completions_group") if data else None
    return group if isinstance(group, str) else None


def groups_to_run(config: RunConfig, conversations: Iterable[Conversation]) -> list[Group]:
    """``--group`` if given; else every group present in the data that can run in this mode."""
    if config.group is not None:
        return [find_group(config.group)]
    present = {_group_of(c) for c in conversations}
    usable = [
        g for g in GROUPS if g.name in present and (config.completions == PHYSICIAN or g.has_references)
    ]
    if not usable:
        raise DataError(f"no row of the dataset has {config.completions} completions of any group")
    return usable


class _Counted:
    """A record's completions of a group (`baseline_rows`), counted as the file is read."""

    def __init__(self, mode: str, group: Group) -> None:
        self.mode, self.group = mode, group
        self.matching = self.skipped = self.completions = 0

    def __call__(self, conversation: Conversation) -> list[BaselineRow]:
        selection = baseline_rows((conversation,), self.mode, self.group)
        self.matching += selection.matching
        self.skipped += selection.skipped
        self.completions += selection.completions
        return selection.rows


def prepare_baseline(
    store: Store,
    config: RunConfig,
    name: str,
    group: Group,
    dataset_file: tuple[DatasetFile, Pages[Conversation]],
) -> tuple[RunRecord, Selection]:
    """The baseline run ``name`` for ``group`` of ``dataset_file`` (read a page at a time, as
    `prepare_eval` reads it: `select_pages`): created with its completions, or the existing one (same
    settings)."""
    assert config.completions is not None
    source, pages = dataset_file
    baseline_rows((), config.completions, group)  # (a mode the group cannot run in: before any read)
    counted = _Counted(config.completions, group)

    def no_completions(_: int) -> None:
        if not counted.completions:
            raise DataError(
                f"no row has {config.completions} completions for {group.name} ({group.short_name})",
                path=str(source.path),
            )

    chosen = select_pages(
        pages,
        rows_of=counted,
        limit=config.limit,
        ids=config.ids,
        themes=config.themes,
        before_choice=no_completions,
    )
    selection = Selection([], counted.matching, counted.skipped, counted.completions)
    existing = store.get_run(name)
    if existing is not None:
        check_same_settings(existing, config)
        if len(store.sample_progress(existing.id)) < chosen.count * config.n_repeats:  # stopped when created
            _write_completions(store, existing.id, chosen, config.n_repeats)
        return existing, selection
    dataset = dataset_record(
        config,
        source,
        conversations=chosen.count,
        completions=config.completions,
        group=group.name,
        rows_without_completions=selection.skipped,
    )
    template = load_template(config.grader_template)
    record = stored_record(config, kind="eval", dataset=dataset, template_sha=template.sha256)
    items = ((row.item_id, row.conversation.model_dump(mode="json"), at) for at, row in chosen.rows())
    run = store.create_run(name, "eval", record, items)
    _write_completions(store, run.id, chosen, config.n_repeats)
    return run, selection


def _write_completions(store: Store, run_id: int, chosen: Chosen[BaselineRow], n_repeats: int) -> None:
    """The completions to grade, stored as the run's samples a page at a time (upserts: writing twice
    changes nothing)."""
    rows = (row for _, row in chosen.rows())
    while page := list(itertools.islice(rows, _SAMPLES_PAGE)):
        store.put(run_id, samples=[_sample_row(row, r) for r in range(n_repeats) for row in page])


def _sample_row(row: BaselineRow, repeat: int) -> SampleRow:
    messages = [m.model_dump() for m in row.conversation.prompt]
    return SampleRow(row.item_id, repeat, None, None, False, None, row.completion, messages)


@dataclass(frozen=True)
class BaselineOutcome:
    group: Group
    outcome: RunOutcome
    selection: Selection


def run_baselines(
    config: RunConfig, *, store: Store, name: str | None = None, **hooks: Unpack[RunHooks]
) -> list[BaselineOutcome]:
    """Grade the dataset's ``config.completions`` for each group (``config.group`` or all), one run each."""
    mode = config.completions
    if mode is None:
        raise ConfigError("a baseline run needs --completions physician or references")
    # no candidate (the completions are given); the group by its canonical name, however it was written
    group_name = find_group(config.group).name if config.group is not None else None
    config = config.model_copy(update={"model": None, "group": group_name})
    loaded = open_conversations(
        config.dataset, data=config.data, cache=config.cache_dir, progress=hooks.get("download_progress")
    )
    groups = groups_to_run(config, itertools.chain.from_iterable(loaded[1]()))
    base = name or new_run_name(mode)
    outcomes: list[BaselineOutcome] = []
    with on_cluster(config):
        for group in groups:
            run_name = base if config.group is not None else f"{base}-{group.short_name}"
            run, selection = prepare_baseline(store, config, run_name, group, loaded)
            if run.parent_run is not None:
                raise RunError(f"run {run_name!r} is a regrade, not a baseline run")
            outcomes.append(BaselineOutcome(group, finish(store, run, config, **hooks), selection))
    return outcomes


@dataclass(frozen=True)
class BaselineEstimate:
    run_name: str
    completions: int
    rows: list[RoleEstimate]


def estimate_baselines(store: Store, config: RunConfig, name: str | None) -> list[BaselineEstimate]:
    """``--dry-run`` of `run_baselines`: the judge calls, tokens and cost each group's run still needs."""
    mode = config.completions
    if mode is None:
        raise ConfigError("a baseline run needs --completions physician or references")
    _, conversations = load_conversations(config.dataset, data=config.data, cache=config.cache_dir)
    base = name or f"{mode}-<generated>"
    out: list[BaselineEstimate] = []
    for group in groups_to_run(config, conversations):
        run_name = base if config.group is not None else f"{base}-{group.short_name}"
        rows = baseline_rows(conversations, mode, group).rows
        chosen = select(rows, limit=config.limit, ids=config.ids, themes=config.themes) if rows else []
        existing = store.get_run(run_name)
        if existing is not None:  # what is left of it, as the run itself would plan it
            todo: Iterable[Todo] = stored_plan(store, existing, config).todo()
        else:
            items = eval_work(
                [row.conversation for row in chosen],
                range(config.n_repeats),
                item_ids=[r.item_id for r in chosen],
            )
            given = (
                replace(w, fixed_completion=row.completion)
                for w, row in zip(items, list(chosen) * config.n_repeats, strict=True)
            )
            todo = fresh_todo(given, panel_labels(config))
        estimates = judge_estimate(todo, config)
        out.append(BaselineEstimate(run_name, len(chosen), estimates))
    return out
