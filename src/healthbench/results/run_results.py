"""A stored run read back as graded samples and scored: every result shape starts here."""

from __future__ import annotations

from healthbench.data.schema import Conversation
from healthbench.errors import RunError
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample, RunScore, ScoringOptions, score_run
from healthbench.scoring.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from healthbench.store.runs import RunRecord, Store

_VERDICTS = {"met": Verdict.MET, "not_met": Verdict.NOT_MET, "ungraded": Verdict.UNGRADED}


def graded_samples(store: Store, run: RunRecord) -> list[GradedSample]:
    """The run's samples in (repeat, conversation) order; missing grades count as ungraded.

    Conversations whose sample failed are returned with an empty completion and every criterion
    ungraded, so they are counted (never silently dropped) and left out of the aggregate.
    """
    if run.kind != "eval":
        raise RunError(f"run {run.name!r} is a {run.kind} run, not an eval run")
    n_repeats = int(run.config["run"].get("n_repeats", 1))
    conversations = [Conversation.model_validate(r) for _, r in store.load_items(run.id)]
    samples = store.load_samples(run.id)
    grades = store.load_grades(run.id)
    out: list[GradedSample] = []
    for repeat in range(n_repeats):
        for conv in conversations:
            sample = samples.get((conv.prompt_id, repeat))
            verdicts: list[Verdict] = []
            explanations: list[str | None] = []
            for index in range(len(conv.rubrics)):
                grade = grades.get((conv.prompt_id, repeat, index))
                verdicts.append(_VERDICTS[grade.status] if grade else Verdict.UNGRADED)
                explanations.append(grade.explanation if grade else None)
            ok = sample is not None and sample.error is None
            out.append(
                GradedSample(
                    conversation=conv,
                    completion=(sample.completion or "") if ok and sample else "",
                    verdicts=tuple(verdicts) if ok else (Verdict.UNGRADED,) * len(conv.rubrics),
                    explanations=tuple(explanations),
                    repeat=repeat,
                    prompt_messages=tuple(sample.messages or ()) if sample else None,
                    usage=sample.usage if sample else None,
                )
            )
    return out


def scoring_options(run: RunRecord) -> ScoringOptions:
    scoring = run.config["run"].get("scoring", {})
    return ScoringOptions(
        n_resamples=scoring.get("n_resamples", DEFAULT_RESAMPLES),
        seed=scoring.get("seed", DEFAULT_SEED),
        length_penalty=scoring.get("length_penalty"),
        length_center=scoring.get("length_center"),
        error_rate=run.config["run"].get("dataset") == "consensus",
        workers=scoring.get("workers", 2),
    )


def score_stored_run(store: Store, run: RunRecord, options: ScoringOptions | None = None) -> RunScore:
    return score_run(graded_samples(store, run), options or scoring_options(run))
