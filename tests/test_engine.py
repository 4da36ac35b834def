"""The run pipeline end to end against the fake server (in its own process, on loopback).

Expected results are computed independently from the fake server's published rules
(`fake_answer`, `fake_verdict`) and scored with the pure core: whatever order calls finish in, with
faults or crashes, the stored grades and the metrics must equal them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

import pytest
from support.fake_runs import FAST_RETRY, fake_run_config
from support.process import GARBAGE_JUDGE, fake_server_process, free_port

from healthbench.config import ModelConfig
from healthbench.data.schema import Conversation
from healthbench.data.sources import load_conversations, read_records
from healthbench.errors import RunError
from healthbench.grading.template import builtin_template
from healthbench.results.run_results import graded_samples, score_stored_run
from healthbench.runner.run import regrade, resume_run, run_eval
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run
from healthbench.store import Store
from healthbench.store.runs import CachedCall, CacheEntry
from healthbench.testing.fake_server import fake_answer, fake_verdict, fetch_stats, reset_stats


def expected_samples(conversations: list[Conversation], n_repeats: int = 1) -> list[GradedSample]:
    template = builtin_template()
    out = []
    for repeat in range(n_repeats):
        for conv in conversations:
            messages = [{"role": m.role, "content": m.content} for m in conv.prompt]
            answer = fake_answer(messages)
            convo = [*messages, {"role": "assistant", "content": answer}]
            verdicts = tuple(
                Verdict.of(fake_verdict(template.render(convo, str(item)))) for item in conv.rubrics
            )
            out.append(GradedSample(conv, answer, verdicts, repeat=repeat))
    return out


@pytest.fixture(scope="module")
def jittery_server():
    with fake_server_process("--latency", "0.002", "--latency-jitter", "0.05", "--seed", "3") as url:
        yield url


@pytest.fixture(scope="module")
def faulty_server():
    with fake_server_process("--fault-rate", "0.2", "--retry-after", "0", "--seed", "11") as url:
        yield url


@pytest.fixture()
def store(store_target: str) -> Store:
    """Every engine test runs on both back ends: a SQLite file, then a PostgreSQL database."""
    return Store(store_target)


def demo() -> list[Conversation]:
    return load_conversations("demo")[1]


def test_grades_stay_attached_whatever_order_calls_finish(jittery_server: str, store: Store) -> None:
    outcome = run_eval(
        fake_run_config(jittery_server, n_repeats=2, max_connections=32),
        store=store,
        name="jitter",
    )
    got = graded_samples(store, outcome.run)
    want = expected_samples(demo(), n_repeats=2)
    assert [(s.conversation.prompt_id, s.repeat, s.completion, s.verdicts) for s in got] == [
        (s.conversation.prompt_id, s.repeat, s.completion, s.verdicts) for s in want
    ]
    assert score_stored_run(store, outcome.run).metrics() == score_run(want).metrics()
    assert outcome.run.status == "finished"


def test_faults_change_nothing_and_leave_nothing_ungraded(faulty_server: str, store: Store) -> None:
    reset_stats(faulty_server)
    outcome = run_eval(fake_run_config(faulty_server), store=store, name="faults")
    stats = fetch_stats(faulty_server)
    assert stats["faults_total"] > 0  # the faults really happened
    score = score_stored_run(store, outcome.run)
    assert score.ungraded_criteria == 0
    assert score.metrics() == score_run(expected_samples(demo())).metrics()


def test_finished_run_makes_no_call_and_cache_serves_a_new_run(jittery_server: str, store: Store) -> None:
    cfg = fake_run_config(jittery_server)
    run_eval(cfg, store=store, name="first")
    reset_stats(jittery_server)
    again = run_eval(cfg, store=store, name="first")
    assert again.counters.tally.calls == 0
    other = run_eval(cfg, store=store, name="second")
    assert other.counters.tally.made == 0 and other.counters.tally.cached_calls == 8 + N_CRITERIA
    assert fetch_stats(jittery_server)["requests"] == 0
    assert score_stored_run(store, other.run).metrics() == score_stored_run(store, again.run).metrics()


def test_a_run_reads_only_the_call_cache_keys_its_calls_ask_for(
    jittery_server: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = store.create_run("old", "eval", {"run": {}}, [])
    unrelated = [CacheEntry(f"{i:064x}", "openai", "old-model", "old answer", None) for i in range(3000)]
    store.put(old.id, cache=unrelated)
    asked: list[str] = []
    found: list[str] = []
    lookup = Store.cache_lookup

    def spy(self: Store, keys: Iterable[str]) -> dict[str, CachedCall]:
        keys = list(keys)
        asked.extend(keys)
        hits = lookup(self, keys)
        found.extend(hits)
        return hits

    monkeypatch.setattr(Store, "cache_lookup", spy)
    calls = 8 + N_CRITERIA
    first = run_eval(fake_run_config(jittery_server), store=store, name="first")
    assert first.counters.tally.made == calls
    assert len(asked) == calls and found == []  # one key per call; none of the 3,000 others is read
    assert score_stored_run(store, first.run).metrics() == score_run(expected_samples(demo())).metrics()
    asked.clear()
    second = run_eval(
        fake_run_config(jittery_server), store=store, name="second"
    )  # the same requests: all cached
    assert second.counters.tally.cached_calls == calls and len(asked) == len(found) == calls
    assert score_stored_run(store, second.run).metrics() == score_stored_run(store, first.run).metrics()


def test_existing_name_with_other_settings_is_refused(jittery_server: str, store: Store) -> None:
    run_eval(fake_run_config(jittery_server), store=store, name="r")
    with pytest.raises(RunError, match="exists with different settings"):
        run_eval(fake_run_config(jittery_server, n_repeats=2), store=store, name="r")


def test_regrade_reuses_samples(jittery_server: str, store: Store) -> None:
    source = run_eval(fake_run_config(jittery_server), store=store, name="src")
    reset_stats(jittery_server)
    judge = ModelConfig(spec="another-judge", base_url=jittery_server)
    out = regrade("src", judge, store=store, name="re", overrides={"retry": FAST_RETRY})
    stats = fetch_stats(jittery_server)
    assert stats["candidate"] == 0 and stats["judge"] == N_CRITERIA
    assert out.run.parent_run == "src"
    # the fake's verdicts depend only on the prompt, so another judge name gives the same scores
    assert score_stored_run(store, out.run).metrics() == score_stored_run(store, source.run).metrics()


N_CRITERIA = sum(len(c.rubrics) for c in demo())


def test_unparseable_judge_is_ungraded_then_resumed(store: Store) -> None:
    port = free_port()
    with fake_server_process(*GARBAGE_JUDGE, port=port) as url:
        outcome = run_eval(fake_run_config(url, judge_retries=1), store=store, name="g")
        stats = fetch_stats(url)
    assert stats["judge"] == N_CRITERIA * 2  # each criterion asked twice (one re-ask), then left ungraded
    score = score_stored_run(store, outcome.run)
    assert (score.ungraded_criteria, score.ungraded_samples) == (N_CRITERIA, 8)
    assert "overall_score" not in score.stats
    assert score.metrics()["ungraded_criteria"] == N_CRITERIA
    assert outcome.run.status == "incomplete"
    # the same endpoint, healed: --resume grades only what is missing, keeping the answers
    with fake_server_process(port=port) as url:
        resumed = resume_run("g", store=store)
        stats = fetch_stats(url)
    assert stats["candidate"] == 0
    assert stats["judge"] == N_CRITERIA
    assert resumed.counters.ungraded == 0 and resumed.run.status == "finished"
    assert score_stored_run(store, resumed.run).metrics() == score_run(expected_samples(demo())).metrics()


@pytest.mark.shared
def test_shared_527_end_to_end_matches_the_core(shared_data: Path, store: Store) -> None:
    data = shared_data / "eval" / "oss_eval_sample527.jsonl"
    with fake_server_process() as url:
        outcome = run_eval(
            fake_run_config(url, data=str(data), max_connections=128),
            store=store,
            name="e2e",
        )
    conversations = read_records(data, Conversation)
    want = expected_samples(conversations)
    options = ScoringOptions()
    assert score_stored_run(store, outcome.run, options).metrics() == score_run(want, options).metrics()
    assert outcome.counters.tally.made == 527 + sum(len(c.rubrics) for c in conversations)


def test_limit_keeps_simple_evals_sample_order(jittery_server: str, store: Store) -> None:
    """--limit picks random.Random(0).sample(conversations, N) and keeps that order (not the file's)."""
    ids = [c.prompt_id for c in demo()]
    chosen = [c.prompt_id for c in random.Random(0).sample(demo(), 3)]
    assert chosen != sorted(chosen, key=ids.index)  # the two orders differ, so the check below can fail
    outcome = run_eval(fake_run_config(jittery_server, limit=3), store=store, name="lim")
    assert [s.conversation.prompt_id for s in graded_samples(store, outcome.run)] == chosen


def test_a_changed_grader_template_is_refused_on_continue(
    jittery_server: str, store: Store, tmp_path: Path
) -> None:
    template = tmp_path / "grader.txt"
    template.write_text(builtin_template().text)
    cfg = fake_run_config(jittery_server, grader_template=str(template), limit=1)
    run_eval(cfg, store=store, name="t")
    template.write_text(builtin_template().text + "\nBe strict.")
    with pytest.raises(RunError, match="grader template text"):
        run_eval(cfg, store=store, name="t")
    with pytest.raises(RunError, match="grader template text"):
        resume_run("t", store=store)
