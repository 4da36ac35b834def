"""The grading state machine both executors run (executors/local.py's async engine and executors/ray.py).

What a run pass does is the same whichever executor calls the models: the work items and the plan
(`Plan`: what the store already holds, read a page at a time), the requests (`sample_request`,
`judge_messages`, `judge_key`), and what each answer becomes (`Ledger`: cache lookups, call counting and
pricing, sample rows; `Grading`: one criterion's attempts, verdict, usage, cost and re-asks, and its
grade row). An executor only decides how and when calls are made and commits the typed `Rows` these hand
it (`Store.put`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from healthbench.defaults import DEFAULT_BATCH_OPEN_ITEMS, DEFAULT_JUDGE_RETRIES, DEFAULT_MAX_CONNECTIONS
from healthbench.errors import ModelError, RunError
from healthbench.executors.progress import RunCounters
from healthbench.grading.template import JUDGE_SCHEMA, GraderTemplate
from healthbench.grading.verdict import VerdictParseError, parse_verdict
from healthbench.models.base import Completion, ModelSettings, ModelSpec, Usage, request_key
from healthbench.models.pricing import PriceTable
from healthbench.store.runs import CacheEntry, GradeRow, GradeStatus, Rows, SampleRow, Store

Messages = list[dict[str, str]]
# whose call a call is, as counted: False the candidate's; a judge's, True or (a panel member's) its label
Caller = bool | str


@dataclass(frozen=True)
class WorkItem:
    """One (item, repeat) to sample (unless ``fixed_completion`` is given) and grade."""

    item_id: str
    repeat: int
    messages: tuple[Mapping[str, str], ...]
    criteria: tuple[str, ...]
    fixed_completion: str | None = None


@dataclass(frozen=True)
class EngineOptions:
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    judge_retries: int = DEFAULT_JUDGE_RETRIES  # re-asks when the judge's answer has no usable verdict
    structured_judge: bool = False  # ask the judge for schema-constrained JSON
    # the candidate's system message, shown to the judge at the head of the conversation as sent
    # (simple-evals grades `actual_queried_message_list`); None: the judge sees the dataset conversation
    judge_sees_system: str | None = None
    progress_every: float = 0.2  # seconds between progress refreshes
    # items in progress at once when calls go through provider batches (--batch): a batch is only
    # as large as the requests waiting together, so far more than the online engine keeps open
    batch_open_items: int = DEFAULT_BATCH_OPEN_ITEMS
    # warm-first judging (decided by the runner: `runner.run.warms_first`): one criterion of each
    # (conversation, repeat) is asked first, its siblings once it has answered, so that they find the
    # prefix they share in the provider's prompt cache
    # (the labels of the members that warm first: their provider caches prompt prefixes)
    warm_first: frozenset[str] = frozenset()
    # the panel: the labels of the judges that grade every criterion (`ModelConfig.label`), the chair
    # first; set by the runner from the run's config (a single judge is a panel of one)
    judges: tuple[str, ...] = ("",)


@dataclass(frozen=True, slots=True)
class CallResult:
    text: str
    usage: Usage
    cost: float | None
    cached: bool


# a criterion to grade: its index, the attempt to start from and the member (label) to ask
Ask = tuple[int, int, str]
Todo = tuple[WorkItem, str | None, list[Ask]]  # a work item, its completion, the criteria to grade


@dataclass(frozen=True)
class Plan:
    """What is left to do in a run: its counts (what is done of what, counted by the store), and its
    pending work read lazily, a page at a time (`pages`, `todo`): per work item, its completion (if
    known) and the criteria still to grade with the attempt to start from (an ungraded criterion is
    asked anew, not answered from the cached answers that left it ungraded), member by member of the
    panel (``judges``: each member's own grades say what it has left). Nothing of the run's
    work is held by the plan itself: an executor keeps only the pages it has taken and not finished.

    ``work`` gives the run's work items a page at a time, in (repeat, item) order, each time it is
    called (`runner.work.stored_plan` reads them from the store)."""

    store: Store
    run_id: int
    work: Callable[[], Iterable[Sequence[WorkItem]]]
    samples_total: int
    samples_done: int
    criteria_total: int
    criteria_done: int  # criteria x members
    judges: tuple[str, ...]  # the panel: the labels of the members whose grades count as done

    @property
    def empty(self) -> bool:
        """Nothing left: every sample taken and every criterion finally graded."""
        return self.samples_done >= self.samples_total and self.criteria_done >= self.criteria_total

    def pages(self) -> Iterator[list[Todo]]:
        """The pending work, one page of work items at a time (pages with nothing left are skipped);
        a page is read when the previous one has been taken."""
        for work in self.work():
            todo = page_todo(self.store, self.run_id, work, self.judges)
            if todo:
                yield todo

    def todo(self) -> Iterator[Todo]:
        """The pending work item by item, in (repeat, item) order (read a page at a time)."""
        for page in self.pages():
            yield from page


def fresh_todo(work: Iterable[WorkItem], judges: Sequence[str]) -> Iterator[Todo]:
    """The pending work of work items nothing is stored for yet (a dry run of a run not made yet):
    each with its given completion, if any, and every criterion from its first attempt, for every
    member of the panel ``judges``."""
    for w in work:
        yield w, w.fixed_completion, [(i, 0, judge) for judge in judges for i in range(len(w.criteria))]


# -- requests: built here once, for both executors ------------------------------------------------
def sample_request(spec: ModelSpec, settings: ModelSettings, w: WorkItem) -> tuple[Messages, str]:
    """The candidate's messages for ``w`` (its system message is added by the model) and the cache key."""
    messages = [dict(m) for m in w.messages]
    return messages, request_key(spec, settings, messages, None, salt=f"repeat:{w.repeat}")


def sample_row(settings: ModelSettings, w: WorkItem, result: CallResult | str) -> SampleRow:
    """A sample's row: the answer, or (``result`` a str) the error of the failed call; its messages are
    the conversation as the candidate received it (its system message first)."""
    system = settings.system_message
    sent = ([{"role": "system", "content": system}] if system else []) + [dict(m) for m in w.messages]
    if isinstance(result, str):
        return SampleRow(w.item_id, w.repeat, None, None, False, result, None, sent)
    return SampleRow(
        w.item_id, w.repeat, result.usage.as_dict(), result.cost, result.cached, None, result.text, sent
    )


def judge_messages(
    template: GraderTemplate, options: EngineOptions, w: WorkItem, completion: str, index: int
) -> Messages:
    """The judge's request for criterion ``index`` of ``w`` answered by ``completion``: one user
    message, or two for a cache-first template (the part shared by the conversation's criteria, then
    the criterion's: `GraderTemplate.render_parts`)."""
    system = options.judge_sees_system
    head = [{"role": "system", "content": system}] if system else []
    conversation = [*head, *w.messages, {"role": "assistant", "content": completion}]
    return [
        {"role": "user", "content": part} for part in template.render_parts(conversation, w.criteria[index])
    ]


def judge_schema(options: EngineOptions) -> dict[str, Any] | None:
    return JUDGE_SCHEMA if options.structured_judge else None


def judge_key(
    spec: ModelSpec,
    settings: ModelSettings,
    messages: Messages,
    schema: dict[str, Any] | None,
    repeat: int,
    attempt: int,
) -> str:
    """The judge call's cache key: repeats are independent judgements (n_repeats measures the judge's
    variance too) and re-asks must not be answered by the cached answer that failed to parse."""
    salt = f"repeat:{repeat};attempt:{attempt}" if (repeat or attempt) else ""
    return request_key(spec, settings, messages, schema, salt=salt)


def cache_entry(key: str, spec: ModelSpec, result: CallResult) -> CacheEntry:
    """The call-cache entry of a real call (written with the row it produced, in one transaction)."""
    return CacheEntry(key, spec.provider, spec.model, result.text, result.usage.as_dict())


def page_todo(store: Store, run_id: int, work: Sequence[WorkItem], judges: Sequence[str]) -> list[Todo]:
    """What is left of ``work`` (one page of a plan): compared with the samples and the grades of each
    member of ``judges`` (labels) the store holds for these items only; member by member, criterion by
    criterion."""
    ids = list(dict.fromkeys(w.item_id for w in work))
    repeats = {w.repeat for w in work}
    repeat = next(iter(repeats)) if len(repeats) == 1 else None
    samples: Mapping[tuple[str, int], str] = {}
    if any(w.fixed_completion is None for w in work):
        samples = store.sample_progress(run_id, item_ids=ids, repeat=repeat)
    grades = store.grade_progress(run_id, item_ids=ids, repeat=repeat)
    todo: list[Todo] = []
    for w in work:
        completion = w.fixed_completion
        if completion is None:
            completion = samples.get((w.item_id, w.repeat))
        missing: list[Ask] = []
        for judge in judges:
            for i in range(len(w.criteria)):
                status, attempts = grades.get((w.item_id, w.repeat, i, judge), (GradeStatus.UNGRADED, 0))
                if status == GradeStatus.UNGRADED:  # never graded, or ungraded: asked (again)
                    missing.append((i, attempts, judge))
        if completion is None or missing:
            todo.append((w, completion, missing))
    return todo


# -- the grading state machine --------------------------------------------------------------------
@dataclass(slots=True)
class Grading:
    """One criterion being graded: its request, and what its attempts have added up to.

    ``attempt`` is the next attempt's number (0-based; a resumed ungraded criterion starts after the
    attempts already stored), ``last`` the last one allowed (``first + judge_retries``). Each answer goes
    through `answered`, a failed call through `failed`; both return the grade row once it is final."""

    w: WorkItem
    completion: str
    index: int
    attempt: int
    last: int
    judge: str  # the label of the member asked
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    cached: bool = True
    raw: str | None = None
    error: str | None = None

    @classmethod
    def start(
        cls,
        w: WorkItem,
        completion: str,
        index: int,
        first: int,
        options: EngineOptions,
        judge: str | None = None,
    ) -> Grading:
        """Criterion ``index`` of ``w`` to be graded by member ``judge`` (None: the chair) from attempt
        ``first``."""
        member = options.judges[0] if judge is None else judge
        return cls(w, completion, index, first, first + options.judge_retries, member)

    def request(
        self, spec: ModelSpec, settings: ModelSettings, template: GraderTemplate, options: EngineOptions
    ) -> tuple[Messages, dict[str, Any] | None, str]:
        """The judge's messages, schema and cache key for the next attempt."""
        messages = judge_messages(template, options, self.w, self.completion, self.index)
        schema = judge_schema(options)
        return messages, schema, judge_key(spec, settings, messages, schema, self.w.repeat, self.attempt)

    def answered(self, result: CallResult) -> GradeRow | None:
        """Account one answer (usage, cost, cached); its grade row, or None when the judge is to be asked
        again (no usable verdict and attempts left)."""
        self.attempt += 1
        self.usage = self.usage + result.usage
        self.cost = None if self.cost is None or result.cost is None else self.cost + result.cost
        self.cached = self.cached and result.cached
        try:
            verdict = parse_verdict(result.text)
        except VerdictParseError as exc:
            self.raw, self.error = result.text, f"unparseable judge answer: {exc}"
            if self.attempt <= self.last:
                return None
            return self._row(GradeStatus.UNGRADED, None, self.raw, self.error)
        status = GradeStatus.MET if verdict.criteria_met else GradeStatus.NOT_MET
        return self._row(status, verdict.explanation, None, None)

    def failed(self, error: str) -> GradeRow:
        """The grade row of a call that failed after its retries: ungraded, keeping what came before."""
        self.attempt += 1
        return self._row(GradeStatus.UNGRADED, None, self.raw, error)

    def _row(
        self, status: GradeStatus, explanation: str | None, raw: str | None, error: str | None
    ) -> GradeRow:
        return GradeRow(
            item_id=self.w.item_id,
            repeat=self.w.repeat,
            usage=self.usage.as_dict(),
            cost=self.cost,
            cached=self.cached,
            error=error,
            criterion=self.index,
            judge=self.judge,
            status=status,
            explanation=explanation,
            attempts=self.attempt,
            raw=raw,
        )


class Ledger:
    """What an executor keeps while it runs a plan: the counters (started from the plan) and the prices;
    how the call cache is read (only the keys this run's calls ask for, in chunks: never the whole
    cache); and how an answer is turned into typed rows and counted."""

    def __init__(
        self, store: Store, run_id: int, prices: PriceTable, counters: RunCounters | None = None
    ) -> None:
        self.store, self.run_id, self.prices = store, run_id, prices
        self.counters = counters or RunCounters()

    def start(self, work_plan: Plan, *, repeat_bound: int | None = None) -> RunCounters:
        """Counters from the plan (what is already done counts). ``repeat_bound``: an earlier session
        ended without finishing, losing at most this many calls in flight (asked again now)."""
        c = self.counters
        c.samples_total, c.samples_done = work_plan.samples_total, work_plan.samples_done
        c.criteria_total, c.criteria_done = work_plan.criteria_total, work_plan.criteria_done
        c.criteria_at_start = work_plan.criteria_done
        c.repeat_bound = repeat_bound
        return c

    def lookup(
        self, keys: Sequence[str], judge: Caller | Sequence[Caller] = False
    ) -> list[CallResult | None]:
        """The call cache's answer to each of ``keys`` (None: not in the cache), each answer counted as a
        cache hit (of the judge, or of a member by its label: ``judge``, for all keys or key by key).
        One read for all of them (in chunks), whatever the cache holds besides."""
        found = self.store.cache_lookup(keys)
        roles = [judge] * len(keys) if isinstance(judge, bool | str) else judge
        out: list[CallResult | None] = []
        for key, of_judge in zip(keys, roles, strict=True):
            hit = found.get(key)
            if hit is None:
                out.append(None)
                continue
            usage = Usage(**hit.usage) if hit.usage else Usage()
            out.append(self.shared(hit.text, usage, judge=of_judge))
        return out

    def shared(self, text: str, usage: Usage, *, judge: Caller = False) -> CallResult:
        """An answer another call already paid for (the cache, or a provider batch's answer to the
        same request), counted as a cache hit."""
        self.counters.count_cache_hit(usage, judge=judge)
        return CallResult(text, usage, 0.0, True)

    def real(
        self, spec: ModelSpec, completion: Completion, *, batch: bool = False, judge: Caller = False
    ) -> CallResult:
        """A real call's answer, priced (at the provider's batch rate for a batch answer) and counted
        (calls, tokens, cost; the judge's apart too, and each member's of a panel)."""
        parts = self.prices.cost_parts(spec.provider, spec.model, completion.usage, batch=batch)
        cost = None if parts is None else sum(parts.values())
        self.counters.count_call(completion.usage, cost, judge=judge, parts=parts)
        return CallResult(completion.text, completion.usage, cost, False)

    def ops(self, result: CallResult | None, key: str, spec: ModelSpec, rows: Rows) -> Rows:
        """One transaction: the rows a call produced, and its call-cache entry when it was a real call."""
        if result is not None and not result.cached:
            rows.cache.append(cache_entry(key, spec, result))
        return rows

    def sampled(
        self, w: WorkItem, settings: ModelSettings, result: CallResult | str
    ) -> tuple[Rows, str | None]:
        """A sample's row (``result`` a str: the error of the failed call), counted; and its completion."""
        rows = Rows(samples=[sample_row(settings, w, result)])
        if isinstance(result, str):
            self.counters.samples_failed += 1
            return rows, None
        self.counters.samples_done += 1
        return rows, result.text

    def graded(self, row: GradeRow | None) -> Rows:
        """A final grade row, counted (None: no row yet, the judge is asked again)."""
        if row is None:
            return Rows()
        self.counters.criteria_done += 1
        if row.status == GradeStatus.UNGRADED:
            self.counters.ungraded += 1
        return Rows(grades=[row])


def run_stopped(error: ModelError, why: str) -> RunError:
    """The error that stops a run when a failed call says every further call would fail alike (``why``:
    a fatal failure, or a model that has never answered)."""
    return RunError(f"{error} ({why}; stopping the run, everything finished so far is saved)")


def no_candidate(w: WorkItem) -> RunError:
    """The error of a work item that needs a sample when the run has no candidate model."""
    return RunError(f"{w.item_id}: no completion stored and no candidate model to sample one")
