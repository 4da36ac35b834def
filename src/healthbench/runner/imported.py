"""Keeping an imported simple-evals run in the store like any other: an eval run with its
conversations, answers and verdicts, written through the Store API, so that it can then be regraded,
analysed and served. Its candidate is unknown (no model is recorded: it is never re-sampled); its
judge is recorded as simple-evals' grader, which resuming would ask about any ungraded criterion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from healthbench.config import RunConfig
from healthbench.errors import RunError
from healthbench.grading.template import load_template
from healthbench.runner.run import stored_record
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample
from healthbench.store.runs import GradeRow, GradeStatus, RunRecord, RunStatus, SampleRow, Store

SIMPLE_EVALS_GRADER = "openai/gpt-4.1"  # simple-evals' HealthBench grader
_STATUS = {
    Verdict.MET: GradeStatus.MET,
    Verdict.NOT_MET: GradeStatus.NOT_MET,
    Verdict.UNGRADED: GradeStatus.UNGRADED,
}


def store_imported(
    store: Store, name: str, samples: Sequence[GradedSample], *, source: Mapping[str, Any]
) -> RunRecord:
    """Store ``samples`` (from `load_allresults`: their conversations are the reader's decoded shapes,
    stored as the JSON they were read from) as the finished eval run ``name``."""
    if not samples:
        raise RunError("the file holds no graded example to store")
    conversations = {s.conversation.prompt_id: s.conversation for s in samples}
    n_repeats = max(s.repeat for s in samples) + 1
    config = RunConfig.model_validate(
        {"model": None, "judge": {"spec": SIMPLE_EVALS_GRADER}, "n_repeats": n_repeats}
    )
    dataset = {"variant": "imported", **source, "conversations": len(conversations)}
    record = stored_record(config, kind="eval", dataset=dataset, template_sha=load_template(None).sha256)
    items = [(pid, msgspec.to_builtins(c)) for pid, c in conversations.items()]
    run = store.create_run(name, "eval", record, items)
    store.put(
        run.id,
        samples=[_sample(sample) for sample in samples],
        grades=[grade for sample in samples for grade in _grades(sample, config.judge.label)],
    )
    ungraded = any(v is Verdict.UNGRADED for s in samples for v in s.verdicts)
    store.set_status(run.id, RunStatus.INCOMPLETE if ungraded else RunStatus.FINISHED)
    return store.require_run(name)


def _sample(sample: GradedSample) -> SampleRow:
    messages = sample.prompt_messages or [
        {"role": m.role, "content": m.content} for m in sample.conversation.prompt
    ]
    usage = dict(sample.usage) if sample.usage else None
    return SampleRow(
        sample.conversation.prompt_id,
        sample.repeat,
        usage,
        None,
        False,
        None,
        sample.completion,
        [dict(m) for m in messages],
    )


def _grades(sample: GradedSample, judge: str) -> list[GradeRow]:
    explanations = sample.explanations or (None,) * len(sample.verdicts)
    return [
        GradeRow(
            item_id=sample.conversation.prompt_id,
            repeat=sample.repeat,
            usage=None,
            cost=None,
            cached=False,
            error="ungraded in the imported file" if verdict is Verdict.UNGRADED else None,
            criterion=index,
            judge=judge,
            status=_STATUS[verdict],
            explanation=explanation,
            attempts=1,
        )
        for index, (verdict, explanation) in enumerate(zip(sample.verdicts, explanations, strict=True))
    ]
