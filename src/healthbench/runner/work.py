"""The work of a run: one work item per (item, repeat), built the same way for every run kind from
what the run stores (its conversations, meta-eval rows or baseline completions)."""

from __future__ import annotations

from collections.abc import Sequence

from healthbench.config import RunConfig
from healthbench.data.schema import Conversation, MetaEvalRecord, row_id
from healthbench.executors.grading import WorkItem
from healthbench.store.runs import RunRecord, Store


def stored_item_ids(store: Store, run: RunRecord) -> list[str]:
    """A run's item ids in order: the prompt ids, or one id per graded completion in a baseline run."""
    return [item_id for item_id, _ in store.load_items(run.id)]


def eval_work(
    conversations: Sequence[Conversation], n_repeats: int, *, item_ids: Sequence[str] | None = None
) -> list[WorkItem]:
    """One work item per (repeat, conversation); ``item_ids`` are the stored ids when they are not the
    prompt ids (a baseline run grades several completions of one conversation)."""
    ids = list(item_ids) if item_ids is not None else [c.prompt_id for c in conversations]
    return [
        WorkItem(
            item_id=item_id,
            repeat=r,
            messages=tuple({"role": m.role, "content": m.content} for m in c.prompt),
            criteria=tuple(str(item) for item in c.rubrics),
        )
        for r in range(n_repeats)
        for item_id, c in zip(ids, conversations, strict=True)
    ]


def meta_work(records: Sequence[MetaEvalRecord], n_repeats: int) -> list[WorkItem]:
    """One work item per (repeat, meta-eval row): its fixed completion graded on its one criterion."""
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


def stored_work(store: Store, run: RunRecord, config: RunConfig) -> list[WorkItem]:
    """Every work item of a stored run, whatever its kind (the engine's plan skips what is done), in
    (repeat, item) order. The stored items are read a page at a time: only the work items are kept,
    never every parsed record at once (at 5,000 conversations those are ~130 MB)."""
    n = config.n_repeats
    by_repeat: list[list[WorkItem]] = [[] for _ in range(n)]
    for page in store.iter_item_pages(run.id):
        if run.kind == "meta_eval":
            made = meta_work([MetaEvalRecord.model_validate(r) for _, r in page], n)
        else:
            conversations = [Conversation.model_validate(r) for _, r in page]
            made = eval_work(conversations, n, item_ids=[item_id for item_id, _ in page])
        for k in range(n):  # both builders give the page's items repeat by repeat
            by_repeat[k].extend(made[k * len(page) : (k + 1) * len(page)])
    return [w for part in by_repeat for w in part]


def samples_answers(run: RunRecord, config: RunConfig) -> bool:
    """Whether the run's answers come from a candidate model: not in a regrade (copied from its parent),
    a meta-eval or a baseline run (given with the data)."""
    return run.kind == "eval" and run.parent_run is None and config.model is not None
