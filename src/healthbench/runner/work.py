"""The work of a run: one work item per (item, repeat), built the same way for every run kind from
what the run stores (its conversations, meta-eval rows or baseline completions)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from healthbench.config import RunConfig
from healthbench.data.schema import Conversation, MetaEvalRecord, row_id
from healthbench.executors.grading import Plan, WorkItem
from healthbench.store.runs import RunRecord, Store

# the list of a stored conversation's criteria (`Conversation.rubrics`), counted by the store for a plan
CRITERIA_FIELD = "rubrics"
# stored items per page of a plan's work (their work items, samples and grades): read on the event loop
# when an item can be opened, a page is a short pause (~50 ms here) and a few MB
PLAN_PAGE = 250


def eval_work(
    conversations: Sequence[Conversation], repeats: Iterable[int], *, item_ids: Sequence[str] | None = None
) -> list[WorkItem]:
    """One work item per (repeat, conversation) of ``repeats`` (``range(n_repeats)``, or the one
    repeat of a plan's page); ``item_ids`` are the stored ids when they are not the prompt ids (a
    baseline run grades several completions of one conversation)."""
    ids = list(item_ids) if item_ids is not None else [c.prompt_id for c in conversations]
    return [
        WorkItem(
            item_id=item_id,
            repeat=r,
            messages=tuple({"role": m.role, "content": m.content} for m in c.prompt),
            criteria=tuple(str(item) for item in c.rubrics),
        )
        for r in repeats
        for item_id, c in zip(ids, conversations, strict=True)
    ]


def meta_work(records: Sequence[MetaEvalRecord], repeats: Iterable[int]) -> list[WorkItem]:
    """One work item per (repeat of ``repeats``, meta-eval row): its fixed completion graded on its one
    criterion."""
    return [
        WorkItem(
            item_id=row_id(r),
            repeat=k,
            messages=tuple({"role": m.role, "content": m.content} for m in r.prompt),
            criteria=(r.rubric,),
            fixed_completion=r.completion,
        )
        for k in repeats
        for r in records
    ]


def stored_plan(store: Store, run: RunRecord, config: RunConfig) -> Plan:
    """What is left of a stored run, whatever its kind: its counts from the store, and its work items
    built a page of stored items at a time when the plan's pages are read (`Plan`), in (repeat, item)
    order. Neither every work item nor every parsed record is ever held at once."""
    n = config.n_repeats
    fixed = run.kind == "meta_eval"  # the completions are given with the rows
    progress = store.run_progress(run.id, n, criteria_field=None if fixed else CRITERIA_FIELD)

    def work() -> Iterator[list[WorkItem]]:
        for r in range(n):
            start = 0
            while True:
                page, start = store.item_page(run.id, start, PLAN_PAGE)
                if not page:
                    break
                made = _page_work(run, page, r)
                del page  # the stored records are not kept while their work items are done
                yield made

    return Plan(
        store,
        run.id,
        work,
        samples_total=progress.items * n,
        samples_done=progress.items * n if fixed else progress.samples_done,
        criteria_total=progress.criteria * n * len(config.panel),  # every member grades every criterion
        criteria_done=progress.grades_done,
        judges=tuple(member.label for member in config.panel),
    )


def _page_work(run: RunRecord, page: Sequence[tuple[str, dict[str, Any]]], repeat: int) -> list[WorkItem]:
    """The work items of one page of a run's stored items, for one repeat."""
    if run.kind == "meta_eval":
        return meta_work([MetaEvalRecord.model_validate(r) for _, r in page], [repeat])
    conversations = [Conversation.model_validate(r) for _, r in page]
    return eval_work(conversations, [repeat], item_ids=[item_id for item_id, _ in page])


def samples_answers(run: RunRecord, config: RunConfig) -> bool:
    """Whether the run's answers come from a candidate model: not in a regrade (copied from its parent),
    a meta-eval or a baseline run (given with the data)."""
    return run.kind == "eval" and run.parent_run is None and config.model is not None
