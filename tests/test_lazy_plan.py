"""The run's plan read lazily from the store (issue #22 item 3): its counts come from the database, its
work a page of stored items at a time with that page's samples and grades only, and a run made through it
stores exactly the rows the fake server's published rules give, however much of it was already done.

Every test runs on both back ends (a SQLite file, then a PostgreSQL database)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import and_, delete, select
from support.fake_runs import FAKE_JUDGE, fake_run_config
from support.process import fake_server_process

from healthbench.config import ModelConfig
from healthbench.data.schema import Conversation
from healthbench.data.sources import load_conversations
from healthbench.executors.grading import Todo
from healthbench.grading.template import builtin_template
from healthbench.models.base import Usage
from healthbench.models.pricing import PriceTable
from healthbench.runner import work as work_module
from healthbench.runner.run import regrade, resume_run, run_eval
from healthbench.runner.work import CRITERIA_FIELD, stored_plan
from healthbench.store import Store
from healthbench.store.db import grades, samples
from healthbench.store.runs import GradeRow, GradeStatus, RunProgress, SampleRow
from healthbench.testing.fake_server import count_words, fake_answer, fake_judge_text, fake_verdict

PAGE = 3  # stored items per page here: the demo's 8 conversations make pages of 3, 3 and 2


@pytest.fixture()
def store(store_target: str) -> Store:
    return Store(store_target)


@pytest.fixture(autouse=True)
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(work_module, "PLAN_PAGE", PAGE)


def demo() -> list[Conversation]:
    return load_conversations("demo")[1]


NOWHERE = "http://127.0.0.1:9"  # a plan alone: nothing is called


def sample(item: str, repeat: int, completion: str | None, error: str | None = None) -> SampleRow:
    return SampleRow(item, repeat, None, None, False, error, completion, None)


def grade(item: str, repeat: int, criterion: int, status: str, attempts: int = 1) -> GradeRow:
    return GradeRow(
        item, repeat, None, None, False, None, criterion, status, None, attempts, judge=FAKE_JUDGE
    )


def test_the_store_counts_a_runs_progress_and_reads_one_pages_rows(store: Store) -> None:
    assert CRITERIA_FIELD in Conversation.model_fields  # what the store counts is a conversation's criteria
    records = [("a", {"rubrics": [1, 2, 3]}), ("b", {"rubrics": [1]}), ("c", {"rubrics": []})]
    run = store.create_run("r", "eval", {}, records)
    other = store.create_run("o", "eval", {}, [("a", {"rubrics": [1] * 5})])
    store.put(
        run.id,
        samples=[
            sample("a", 0, "A0"),
            sample("b", 0, None, error="boom"),  # failed: not done
            sample("a", 1, "A1"),  # a second repeat: counted only when the run has two
            sample("zz", 0, "Z"),  # not an item of the run: never counted
        ],
        grades=[
            grade("a", 0, 0, GradeStatus.MET),
            grade("a", 0, 1, GradeStatus.UNGRADED, attempts=2),  # not done
            grade("a", 0, 2, GradeStatus.NOT_MET),
            grade("b", 0, 0, GradeStatus.MET),
            grade("a", 1, 0, GradeStatus.MET),
        ],
    )
    store.put(other.id, samples=[sample("a", 0, "other")], grades=[grade("a", 0, 0, GradeStatus.MET)])

    assert store.run_progress(run.id, 1, "rubrics") == RunProgress(
        items=3, criteria=4, samples_done=1, grades_done=3
    )
    assert store.run_progress(run.id, 2, "rubrics") == RunProgress(3, 4, 2, 4)
    assert store.run_progress(run.id, 1, None) == RunProgress(3, 3, 1, 3)  # one criterion per item
    assert store.run_progress(other.id, 1, "rubrics") == RunProgress(1, 5, 1, 1)
    # one page's rows: only the items (and repeat) asked for
    assert store.sample_progress(run.id, item_ids=["a"], repeat=0) == {("a", 0): "A0"}
    assert store.sample_progress(run.id, item_ids=["a", "b"]) == {("a", 0): "A0", ("a", 1): "A1"}
    assert store.grade_progress(run.id, item_ids=["b", "c"], repeat=0) == {
        ("b", 0, 0, FAKE_JUDGE): ("met", 1)
    }
    assert set(store.grade_progress(run.id, item_ids=["a"], repeat=1)) == {("a", 1, 0, FAKE_JUDGE)}


def test_the_plan_reads_one_page_at_a_time_in_repeat_then_item_order(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversations = demo()
    run = store.create_run("p", "eval", {}, [(c.prompt_id, c.model_dump(mode="json")) for c in conversations])
    ids = [c.prompt_id for c in conversations]
    n_criteria = {c.prompt_id: len(c.rubrics) for c in conversations}
    done_samples = {(ids[0], 0), (ids[1], 0), (ids[4], 1), (ids[7], 1)}
    store.put(run.id, samples=[sample(i, r, f"answer {i} {r}") for i, r in sorted(done_samples)])
    store.put(run.id, samples=[sample(ids[2], 0, None, error="failed")])
    # ids[0] fully graded; ids[1] half graded, one of them ungraded after 2 attempts; ids[4] repeat 1 all
    stored = [grade(ids[0], 0, k, GradeStatus.MET) for k in range(n_criteria[ids[0]])]
    stored += [grade(ids[1], 0, 0, GradeStatus.NOT_MET), grade(ids[1], 0, 1, GradeStatus.UNGRADED, 2)]
    stored += [grade(ids[4], 1, k, GradeStatus.NOT_MET) for k in range(n_criteria[ids[4]])]
    store.put(run.id, grades=stored)

    reads: list[int] = []
    page_of = store.item_page

    def counted(run_id: int, start: int, page_size: int) -> tuple[list[tuple[str, dict[str, Any]]], int]:
        page, after = page_of(run_id, start, page_size)
        reads.append(len(page))
        return page, after

    monkeypatch.setattr(store, "item_page", counted)
    plan = stored_plan(store, run, fake_run_config(NOWHERE, n_repeats=2))
    assert reads == []  # counted by the store: no item read yet
    assert (plan.samples_total, plan.samples_done) == (16, 4)
    assert (plan.criteria_total, plan.criteria_done) == (2 * sum(n_criteria.values()), len(stored) - 1)
    assert not plan.empty
    pages = plan.pages()
    first = next(pages)
    assert reads == [PAGE]  # one page of items read, not the run
    todo: list[Todo] = [*first, *(t for page in pages for t in page)]
    assert reads == [3, 3, 2, 0, 3, 3, 2, 0]  # each repeat reads the items again, a page at a time

    want = []
    for r in range(2):
        for i in ids:
            completion = f"answer {i} {r}" if (i, r) in done_samples else None
            missing = [(k, 0, FAKE_JUDGE) for k in range(n_criteria[i])]
            if (i, r) == (ids[0], 0) or (i, r) == (ids[4], 1):
                missing = []
            elif (i, r) == (ids[1], 0):
                missing = [(1, 2, FAKE_JUDGE), *missing[2:]]  # the ungraded one starts after its 2 attempts
            if completion is None or missing:
                want.append((i, r, completion, missing))
    assert [(w.item_id, w.repeat, c, m) for w, c, m in todo] == want
    assert all(
        w.criteria == tuple(str(x) for x in conversations[ids.index(w.item_id)].rubrics) for w, _, _ in todo
    )


def test_a_finished_run_plans_nothing(store: Store) -> None:
    conversations = demo()[:2]
    run = store.create_run("f", "eval", {}, [(c.prompt_id, c.model_dump(mode="json")) for c in conversations])
    store.put(
        run.id,
        samples=[sample(c.prompt_id, 0, "x") for c in conversations],
        grades=[grade(c.prompt_id, 0, k, "met") for c in conversations for k in range(len(c.rubrics))],
    )
    plan = stored_plan(store, run, fake_run_config(NOWHERE))
    assert plan.empty and list(plan.pages()) == []


# -- every stored row of runs made through the lazy plan, against the fake server's rules ----------
def expected_rows(
    conversations: list[Conversation], n_repeats: int, prices: PriceTable
) -> tuple[dict[tuple[str, int], SampleRow], dict[tuple[str, int, int, str], GradeRow]]:
    """The rows a run of fresh calls stores (each criterion graded on its first attempt)."""
    template = builtin_template()
    sample_rows, grade_rows = {}, {}
    for r in range(n_repeats):
        for c in conversations:
            messages = [{"role": m.role, "content": m.content} for m in c.prompt]
            answer = fake_answer(messages)
            usage = Usage(sum(count_words(m["content"]) for m in messages), count_words(answer))
            cost = prices.cost("openai", "fake-candidate", usage)
            sample_rows[c.prompt_id, r] = SampleRow(
                c.prompt_id, r, usage.as_dict(), cost, False, None, answer, messages
            )
            convo = [*messages, {"role": "assistant", "content": answer}]
            for k, item in enumerate(c.rubrics):
                prompt = template.render(convo, str(item))
                reply = fake_judge_text(prompt)
                met = fake_verdict(prompt)
                judged = Usage(count_words(prompt), count_words(reply))
                grade_rows[c.prompt_id, r, k, FAKE_JUDGE] = GradeRow(
                    c.prompt_id,
                    r,
                    judged.as_dict(),
                    prices.cost("openai", "fake-judge", judged),
                    False,
                    None,
                    k,
                    GradeStatus.MET if met else GradeStatus.NOT_MET,
                    f"Fake judge {reply.split('Fake judge ')[1].split(':')[0]}: criterion "
                    + ("met" if met else "not met")
                    + ".",
                    1,
                    judge=FAKE_JUDGE,
                )
    return sample_rows, grade_rows


def from_cache(row: GradeRow) -> GradeRow:
    """The same row answered from the call cache: free, flagged cached."""
    return GradeRow(**{**vars(row), "cost": 0.0, "cached": True})


def raw_rows(store: Store, table: Any, run_id: int) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Every column of a run's rows (creation time included), by key."""
    keys = [c.name for c in table.primary_key.columns if c.name != "run_id"]
    with store.engine.connect() as conn:
        rows = conn.execute(select(table).where(table.c.run_id == run_id)).mappings().all()
    return {tuple(row[k] for k in keys): {k: v for k, v in row.items() if k != "run_id"} for row in rows}


def forget(store: Store, table: Any, run_id: int, keys: list[tuple[Any, ...]]) -> None:
    """Delete some rows of a run, as if the run had been killed before they were committed."""
    names = [c.name for c in table.primary_key.columns if c.name != "run_id"]
    with store.engine.begin() as conn:
        for key in keys:
            where = [table.c[name] == value for name, value in zip(names, key, strict=True)]
            conn.execute(delete(table).where(and_(table.c.run_id == run_id, *where)))


def test_resumed_and_regraded_runs_store_exactly_the_expected_rows(store: Store) -> None:
    conversations = demo()
    ids = [c.prompt_id for c in conversations]
    with fake_server_process() as url:
        cfg = fake_run_config(url, n_repeats=2, max_connections=4)
        want_samples, want_grades = expected_rows(conversations, 2, PriceTable.load(cfg.prices))
        first = run_eval(cfg, store=store, name="lazy")
        run_id = first.run.id
        assert store.load_samples(run_id) == want_samples
        assert store.load_grades(run_id) == want_grades

        # an interrupted session's leftovers: answers and grades never committed, criteria ungraded
        lost_samples = [(ids[3], 1), (ids[6], 1)]  # with their grades
        lost_grades = [k for k in want_grades if k[2] == 0 and k[1] == 0] + [
            k for k in want_grades if k[:2] in lost_samples
        ]
        ungraded = [k for k in want_grades if k[2] == 1 and k[0] in ids[::2] and k not in lost_grades]
        forget(store, samples, run_id, lost_samples)
        forget(store, grades, run_id, lost_grades)
        store.put(
            run_id,
            grades=[
                GradeRow(
                    *k[:2],
                    None,
                    None,
                    False,
                    "judge failed",
                    k[2],
                    GradeStatus.UNGRADED,
                    None,
                    2,
                    "?",
                    judge=k[3],
                )
                for k in ungraded
            ],
        )
        store.set_status(run_id, "interrupted")
        kept_samples = raw_rows(store, samples, run_id)
        kept_grades = {k: v for k, v in raw_rows(store, grades, run_id).items() if k not in ungraded}

        resumed = resume_run("lazy", store=store)
        # the lost calls come from the call cache; the ungraded ones are asked anew (attempt 3)
        assert resumed.counters.tally.made == len(ungraded)
        assert resumed.counters.tally.cached_calls == len(lost_samples) + len(lost_grades)
        assert resumed.run.status == "finished"
        got_samples, got_grades = store.load_samples(run_id), store.load_grades(run_id)
        assert got_samples == {
            k: SampleRow(**{**vars(v), "cost": 0.0, "cached": True}) if k in lost_samples else v
            for k, v in want_samples.items()
        }
        assert got_grades == {
            k: from_cache(v)
            if k in lost_grades
            else GradeRow(**{**vars(v), "attempts": 3})
            if k in ungraded
            else v
            for k, v in want_grades.items()
        }
        # what was done is left as it was (not rewritten)
        after = raw_rows(store, samples, run_id)
        assert {k: after[k] for k in kept_samples} == kept_samples
        after = raw_rows(store, grades, run_id)
        assert {k: after[k] for k in kept_grades} == kept_grades

        # a regrade with another judge: the parent's samples, every criterion graded anew
        judge = ModelConfig(spec="other-judge", base_url=url)
        re = regrade("lazy", judge, store=store, name="re", overrides={"max_connections": 4})
        other_judge = {
            (*k[:3], "other-judge"): GradeRow(
                **{
                    **vars(v),
                    "cost": PriceTable.load(cfg.prices).cost("openai", "other-judge", Usage(**v.usage)),
                    "judge": "other-judge",
                }  # type: ignore[arg-type]
            )
            for k, v in want_grades.items()
        }
        assert store.load_grades(re.run.id) == other_judge
        parent_samples = raw_rows(store, samples, run_id)
        assert raw_rows(store, samples, re.run.id) == parent_samples
        # ... and the regrade resumed after losing some of its grades: answered from the cache
        lost = [k for k in other_judge if k[0] in ids[:3]]
        forget(store, grades, re.run.id, lost)
        again = resume_run("re", store=store)
        assert again.counters.tally.made == 0 and again.counters.tally.cached_calls == len(lost)
        assert store.load_grades(re.run.id) == {
            k: from_cache(v) if k in lost else v for k, v in other_judge.items()
        }
        assert raw_rows(store, samples, re.run.id) == parent_samples


def test_the_engine_reads_a_page_only_when_an_item_can_be_opened(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(work_module, "PLAN_PAGE", 1)  # one conversation per page
    answered_at_read: list[int] = []
    page_of = store.item_page

    def counted(run_id: int, start: int, page_size: int) -> tuple[list[tuple[str, dict[str, Any]]], int]:
        answered_at_read.append(len(store.sample_progress(run_id)))
        return page_of(run_id, start, page_size)

    monkeypatch.setattr(store, "item_page", counted)
    with fake_server_process() as url:
        # 2 connections: 4 conversations open at once, so page k is read once k - 4 are done
        outcome = run_eval(fake_run_config(url, max_connections=2), store=store, name="window")
    assert outcome.run.status == "finished"
    reads = answered_at_read[: len(demo())]  # then one empty read: the end of the items
    assert len(answered_at_read) == len(demo()) + 1
    assert reads[:4] == [0, 0, 0, 0]  # the window fills without waiting
    assert all(answered >= k - 4 for k, answered in enumerate(reads))
    assert reads[-1] >= len(demo()) - 4  # the last page waited for its place: not read up front
