"""A stored eval run as an Inspect evaluation log (``.eval`` or ``.json``), built with inspect_ai's own
types and written with its ``write_eval_log``, so that ``inspect view`` opens it and
``inspect_ai.log.read_eval_log`` reads it (docs/interop.md).

One `EvalSample` per answer (conversation × repeat; ``epoch`` = repeat + 1): the conversation, the
answer, its score (``healthbench``: the conversation's ``overall_score``, NaN, Inspect's "unscored",
when the sample is left out as ungraded) with every criterion's verdict and explanation in the score's
metadata, and the candidate's and the judge's usage. The log's results are the run's metrics: the same
document ``--metrics-out`` writes. A panel of judges' run (docs/panels.md) adds one score per member,
``judge:<label>`` (the member's own overall score of the answer, its verdicts in the metadata), to
every sample, and one per member to the results (its ``judge:<label>:*`` keys). inspect_ai
(``pip install 'healthbench[inspect]'``) is imported only when a log is written.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from healthbench import __version__
from healthbench.atomic import atomic_writer
from healthbench.errors import ConfigError
from healthbench.models.tally import CallTally
from healthbench.results.views import VERDICT_NAMES, RunView, StoredSample
from healthbench.scoring.rubric import OVERALL, Verdict
from healthbench.scoring.run_score import GradedSample, RunScore, sample_metrics

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample
    from inspect_ai.model import ModelUsage

INSPECT_INSTALL_HINT = "--inspect-log-out needs inspect-ai: pip install 'healthbench[inspect]'"
SCORER = "healthbench"  # the name of the one score of every sample and of the log's results
NO_MODEL = "none/none"  # Inspect's model name when no model answered (baseline runs)
ROLES = ("candidate", "judge")


def write_inspect_log(
    path: str | os.PathLike[str], view: RunView, score: RunScore, metrics: Mapping[str, Any]
) -> Path:
    """Write eval run ``view`` as an Inspect log at ``path``: ``.json`` gives Inspect's JSON format,
    any other name its ``.eval`` (zip) format. ``score`` is the run's `RunScore` (its per-sample values,
    in `RunView.iter_samples` order) and ``metrics`` the run's metrics document
    (`healthbench.results.metrics_out.metrics_document`). The file appears whole or not at all."""
    try:
        from inspect_ai.log import write_eval_log
    except ImportError:
        raise ConfigError(INSPECT_INSTALL_HINT) from None
    log = build_inspect_log(view, score, metrics)
    target = Path(path)
    with tempfile.TemporaryDirectory(prefix="healthbench-inspect-") as scratch:
        written = Path(scratch) / f"log{'.json' if target.suffix == '.json' else '.eval'}"
        write_eval_log(log, str(written))
        with written.open("rb") as source, atomic_writer(target) as out:
            shutil.copyfileobj(source, out)
    return target


def build_inspect_log(view: RunView, score: RunScore, metrics: Mapping[str, Any]) -> EvalLog:
    """The `EvalLog` of eval run ``view`` (see the module doc)."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSpec, EvalStats
    from inspect_ai.model import ModelConfig

    view.require_kind("eval")
    model = view.model_spec or NO_MODEL
    samples: list[EvalSample] = []
    per_sample = iter(score.per_sample)
    for page in view.iter_sample_pages():
        for stored, judge in zip(page, view.judge_usage(page), strict=True):
            members = _member_scores(stored, score) if view.is_panel else {}
            samples.append(_sample(stored, next(per_sample), judge, model, view.judge_spec, members))
    if next(per_sample, samples) is not samples:
        raise ValueError(f"the score has more samples than run {view.name!r}")
    dataset = view.dataset
    totals = view.usage_totals()
    spec = EvalSpec(
        created=view.record.created_at,
        task="healthbench",
        run_id=view.name,
        dataset=EvalDataset(
            name=view.dataset_name,
            location=dataset.get("path") or dataset.get("url"),
            samples=view.store.count_items(view.record.id),
        ),
        model=model,
        model_roles={
            "judge": ModelConfig(model=view.judge_spec),
            **{f"judge:{label}": ModelConfig(model=label) for label in view.members[1:]},
        },
        config=EvalConfig(epochs=view.config.n_repeats),
        packages={"healthbench": __version__},
        metadata={
            "healthbench_run": view.name,
            "status": view.status,
            "dataset": dataset,
            "completions": view.config.completions,
            **view.provenance(),
        },
    )
    return EvalLog(
        status="success" if view.status == "finished" else "started",
        eval=spec,
        results=_results(score, metrics, len(samples), view.members if view.is_panel else []),
        stats=EvalStats(
            started_at=view.record.created_at,
            completed_at=view.record.updated_at,
            model_usage=_by_model([(model, totals.candidate), (view.judge_spec, totals.judge)]),
            role_usage={"candidate": _usage(totals.candidate), "judge": _usage(totals.judge)},
        ),
        samples=samples,
    )


def _results(score: RunScore, metrics: Mapping[str, Any], n_samples: int, members: Sequence[str]) -> Any:
    """The log's results: each numeric key of the metrics document as one metric of the ``healthbench``
    score; the whole document (nulls and the provenance strings too) in the results' metadata. A
    panel's ``members`` get a score each, ``judge:<label>``, of their ``judge:<label>:*`` keys."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    numbers = {
        key: EvalMetric(name=key, value=value)
        for key, value in metrics.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }
    per_member = [
        EvalScore(
            name=f"judge:{label}",
            scorer=SCORER,
            metrics={
                key.removeprefix(f"judge:{label}:"): EvalMetric(
                    name=key.removeprefix(f"judge:{label}:"), value=metric.value
                )
                for key, metric in numbers.items()
                if key.startswith(f"judge:{label}:")
            },
        )
        for label in members
    ]
    return EvalResults(
        total_samples=n_samples,
        completed_samples=n_samples - score.ungraded_samples,
        scores=[
            EvalScore(
                name=SCORER,
                scorer=SCORER,
                scored_samples=n_samples - score.ungraded_samples,
                unscored_samples=score.ungraded_samples,
                metrics=numbers,
            ),
            *per_member,
        ],
        metadata={"metrics": dict(metrics)},
    )


def _sample(
    stored: StoredSample,
    values: Mapping[str, float] | None,
    judge: CallTally,
    model: str,
    judge_spec: str,
    members: Mapping[str, Any],
) -> EvalSample:
    from inspect_ai._util.error import EvalError
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput
    from inspect_ai.scorer import Score

    graded, row = stored.graded, stored.sample
    conversation = graded.conversation
    answered = row is not None and row.error is None
    sent = graded.prompt_messages or [{"role": m.role, "content": m.content} for m in conversation.prompt]
    messages = _messages(sent)
    if answered:
        messages.append(ChatMessageAssistant(content=graded.completion, model=model))
    criteria = _criteria(graded)
    met = sum(verdict is Verdict.MET for verdict in graded.verdicts)
    candidate = CallTally()
    if row is not None:
        candidate.count(row.usage, row.cost, cached=row.cached, failed=row.error is not None)
    return EvalSample(
        id=stored.item_id,
        epoch=graded.repeat + 1,
        input=_messages([{"role": m.role, "content": m.content} for m in conversation.prompt]),
        target=[item.criterion for item in conversation.rubrics],
        messages=messages,
        output=ModelOutput.from_content(model, graded.completion) if answered else ModelOutput(model=model),
        scores={
            SCORER: Score(
                value=values[OVERALL] if values is not None else math.nan,
                answer=graded.completion if answered else None,
                explanation=f"{met} of {len(criteria)} criteria met"
                + (f", {graded.ungraded} ungraded (left out of the scores)" if graded.ungraded else ""),
                metadata={"criteria": criteria, "metrics": dict(values) if values is not None else None},
            ),
            **members,
        },
        metadata={
            "prompt_id": conversation.prompt_id,
            "repeat": graded.repeat,
            "example_tags": list(conversation.example_tags),
            "cached": row.cached if row is not None else False,
        },
        model_usage=_by_model([(model, candidate), (judge_spec, judge)]),
        role_usage={"candidate": _usage(candidate), "judge": _usage(judge)},
        error=None
        if answered
        else EvalError(
            message=(row.error if row else None) or "not sampled", traceback="", traceback_ansi=""
        ),
    )


def _criteria(graded: GradedSample) -> list[dict[str, Any]]:
    """Each criterion of an answer with its verdict and explanation."""
    explanations = graded.explanations or (None,) * len(graded.verdicts)
    return [
        {
            "criterion": item.criterion,
            "points": item.points,
            "tags": list(item.tags),
            "verdict": VERDICT_NAMES[verdict],
            "criteria_met": None if verdict is Verdict.UNGRADED else verdict is Verdict.MET,
            "explanation": explanation,
        }
        for item, verdict, explanation in zip(
            graded.conversation.rubrics, graded.verdicts, explanations, strict=True
        )
    ]


def _member_scores(stored: StoredSample, score: RunScore) -> dict[str, Any]:
    """A panel's members' own scores of one answer: ``judge:<label>``, NaN when left out as ungraded."""
    from inspect_ai.scorer import Score

    out = {}
    for label, member in stored.members.items():
        values = sample_metrics(member, score.options)
        met = sum(verdict is Verdict.MET for verdict in member.verdicts)
        out[f"judge:{label}"] = Score(
            value=values[OVERALL] if values is not None else math.nan,
            explanation=f"{label}: {met} of {len(member.verdicts)} criteria met"
            + (f", {member.ungraded} ungraded" if member.ungraded else ""),
            metadata={"criteria": _criteria(member)},
        )
    return out


def _messages(messages: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Chat messages as inspect_ai's ChatMessage types (``developer`` is a system message to Inspect)."""
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds.get(str(m["role"]), ChatMessageSystem)(content=str(m["content"])) for m in messages]


def _usage(tally: CallTally) -> ModelUsage:
    """A tally as Inspect's ModelUsage, in its terms: ``input_tokens`` are those billed at the full
    input rate, the ones read from the prompt cache (``input_tokens_cache_read``) and written to it
    (``input_tokens_cache_write``) apart (we count every input token as input); ``total_tokens``
    counts them all; ``total_cost`` is None when some call's price is unknown."""
    from inspect_ai.model import ModelUsage

    tokens = tally.tokens
    read, written = tally.cached_input_tokens, tally.cache_write_input_tokens
    return ModelUsage(
        input_tokens=tally.input_tokens - read - written,
        output_tokens=tally.output_tokens,
        total_tokens=tally.input_tokens + tally.output_tokens,
        input_tokens_cache_read=tokens.get("cached_input_tokens"),
        input_tokens_cache_write=tokens.get("cache_write_input_tokens"),
        reasoning_tokens=tokens.get("reasoning_tokens"),
        total_cost=None if tally.unpriced_calls else tally.cost,
    )


def _by_model(tallies: Sequence[tuple[str, CallTally]]) -> dict[str, ModelUsage]:
    """Usage by model name; a model that is both candidate and judge gets both roles' calls."""
    merged: dict[str, CallTally] = {}
    for name, tally in tallies:
        merged.setdefault(name, CallTally()).add(tally)
    return {name: _usage(tally) for name, tally in merged.items()}
