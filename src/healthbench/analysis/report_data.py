"""What the HTML report shows, as plain JSON-able data: every number comes from `score_run`.

`report_summary` holds the small part (per run: headline score, theme and axis scores with CIs, the
distribution of conversation scores, ungraded counts, tokens and cost); `report_conversations` holds
the conversation browser's data, each conversation's prompt and rubric once however many runs answered
it, and per run one entry per graded answer. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from healthbench.analysis.compare import FEW_CONVERSATIONS, p_text
from healthbench.data.shapes import themes_of
from healthbench.results.summary import ci_unit
from healthbench.scoring.rubric import OVERALL, Verdict
from healthbench.scoring.run_score import GradedSample, RunScore
from healthbench.scoring.stats import KeyStats
from healthbench.scoring.worst_at_k import scores_by_conversation, worst_at_k_curves

if TYPE_CHECKING:
    from healthbench.analysis.compare import Comparison, GateDecision
    from healthbench.results.views import UsageTotals

# Conversation-score bins of the distribution chart: below 0, then ten bins of 0.1 up to 1 inclusive.
SCORE_BIN_EDGES = tuple(round(0.1 * i, 1) for i in range(11))
SCORE_BIN_LABELS = ("< 0", *(f"{lo:.1f}–{hi:.1f}" for lo, hi in pairwise(SCORE_BIN_EDGES)))
_VERDICT_CODES = {Verdict.MET: "m", Verdict.NOT_MET: "n", Verdict.UNGRADED: "u"}
FEW_FOR_A_KEY = 10  # a theme or axis scored on fewer samples: marked, its interval drawn as uncertain


class ReportInput(Protocol):
    """One run to report: who answered (``model``), which run, and its graded samples."""

    @property
    def model(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    @property
    def samples(self) -> Sequence[GradedSample]: ...


@dataclass(frozen=True)
class ScoredRun:
    """A run to report with its score (the same `RunScore` every other output shows)."""

    model: str
    run_id: str
    samples: Sequence[GradedSample]
    score: RunScore
    cost: float | None = None  # USD, when the input knows it
    usage: UsageTotals | None = None  # a stored run's calls, tokens and cost per role
    judges: Mapping[str, Any] | None = None  # a panel's "Judges" section (`report_judges.judges_summary`)

    @property
    def label(self) -> str:
        return f"{self.model}/{self.run_id}" if self.run_id else self.model  # as `LoadedRun.label`


def stat_entry(stats: KeyStats | None) -> dict[str, float | int] | None:
    """A key's mean, CI and n as the report embeds them (None when the key was not scored)."""
    if stats is None:
        return None
    return {
        "mean": stats.mean,
        "lo": stats.ci_lower,
        "hi": stats.ci_upper,
        "n": stats.n_samples,
    }


def score_histogram(per_sample: Sequence[Mapping[str, float] | None]) -> list[int]:
    """Graded conversations per bin of `SCORE_BIN_LABELS` (below 0, then [0, 0.1), ..., [0.9, 1])."""
    scores = np.array([m[OVERALL] for m in per_sample if m is not None], dtype=np.float64)
    below = int(np.count_nonzero(scores < 0))
    counts, _ = np.histogram(scores[scores >= 0], bins=np.array(SCORE_BIN_EDGES))
    return [below, *(int(c) for c in counts)]


def token_totals(samples: Sequence[GradedSample]) -> dict[str, int | None]:
    """The candidate's input and output tokens over the run (None when no sample recorded usage)."""
    known = [s.usage for s in samples if s.usage]
    if not known:
        return {"input": None, "output": None}
    return {
        "input": sum(int(u.get("input_tokens") or 0) for u in known),
        "output": sum(int(u.get("output_tokens") or 0) for u in known),
    }


def usage_entry(run: ScoredRun) -> dict[str, Any]:
    """The run's tokens and cost as the report shows them: a stored run's from its stored usage (every
    call of both roles, `RunView.usage_totals`; cost None when a model has no price), else the
    candidate's tokens recorded with the answers and the cost the input carries (if any)."""
    if run.usage is None:
        return {"tokens": token_totals(run.samples), "judge_tokens": None, "cost": run.cost}
    candidate, judge = run.usage.candidate, run.usage.judge
    cost = None if candidate.known_cost is None or judge.known_cost is None else run.usage.cost
    return {
        "tokens": {"input": candidate.input_tokens, "output": candidate.output_tokens},
        "judge_tokens": judge.token_counts() | {"cached_share": judge.cached_share},
        "cost": cost,
        "judge_cost": judge.known_cost,
    }


def _keyed(stats: Mapping[str, KeyStats], prefix: str) -> dict[str, dict[str, float | int] | None]:
    return {
        key.removeprefix(prefix): stat_entry(value)
        for key, value in sorted(stats.items())
        if key.startswith(prefix)
    }


def _ci_unit(stats: KeyStats | None) -> str | None:
    return None if stats is None else ci_unit(stats.n_samples, stats.n_conversations)


def worst_at_k_summary(runs: Sequence[ScoredRun]) -> list[dict[str, Any]]:
    """Per model (its runs pooled as repeats), the paper's worst-at-k curve
    (`healthbench.scoring.worst_at_k`): ``{"model", "points": [{"k", "value", "lo", "hi", "n"}]}``,
    bootstrapped as the first run's options say."""
    if not runs:
        return []
    by_model: dict[str, tuple[list[str], list[float]]] = {}
    for run in runs:
        ids, scores = by_model.setdefault(run.model, ([], []))
        for sample, metrics in zip(run.samples, run.score.per_sample, strict=True):
            if metrics is not None:
                ids.append(sample.conversation.prompt_id)
                scores.append(metrics[OVERALL])
    curves = worst_at_k_curves(
        [scores_by_conversation(ids, scores) for ids, scores in by_model.values()], runs[0].score.options
    )
    return [
        {
            "model": model,
            "points": [
                {"k": p.k, "value": p.worst_at_k, "lo": p.ci_lower, "hi": p.ci_upper, "n": p.n_conversations}
                for p in curve
            ],
        }
        for model, curve in zip(by_model, curves, strict=True)
    ]


def graded_text(n_answers: int, graded: int, n_conversations: int) -> str:
    """What the run's count counts: answers, and conversations × answers when a conversation has
    several (repeats), e.g. ``240 of 240 answers graded (80 conversations × 3 answers)``."""
    if n_answers == n_conversations:
        return f"{graded:,} of {n_answers:,} conversations graded (one answer each)"
    return f"{graded:,} of {n_answers:,} answers graded ({ci_unit(n_answers, n_conversations)})"


def run_summary(run: ScoredRun) -> dict[str, Any]:
    score = run.score
    n_conversations = len({s.conversation.prompt_id for s in run.samples})
    graded = score.n_samples - score.ungraded_samples
    return {
        "label": run.label,
        "model": run.model,
        "run_id": run.run_id,
        "n_samples": score.n_samples,
        "n_conversations": n_conversations,
        "graded_text": graded_text(score.n_samples, graded, n_conversations),
        "graded": graded,
        "ungraded_samples": score.ungraded_samples,
        "ungraded_criteria": score.ungraded_criteria,
        "overall": stat_entry(score.stats.get(OVERALL)),
        "ci_unit": _ci_unit(score.stats.get(OVERALL)),
        "themes": _keyed(score.stats, "theme:"),
        "axes": _keyed(score.stats, "axis:"),
        "histogram": score_histogram(score.per_sample),
        **usage_entry(run),
        "judges": run.judges,
    }


def report_summary(
    runs: Sequence[ScoredRun], *, title: str, comparison: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Everything but the conversations: small, embedded as JSON and also rendered as tables."""
    summaries = [run_summary(run) for run in runs]
    return {
        "title": title,
        "confidence": runs[0].score.options.confidence if runs else 0.95,
        "runs": summaries,
        "themes": sorted({t for s in summaries for t in s["themes"]}),
        "axes": sorted({a for s in summaries for a in s["axes"]}),
        "bins": list(SCORE_BIN_LABELS),
        "worst_at_k": worst_at_k_summary(runs),
        "few": FEW_FOR_A_KEY,
        "comparison": comparison,
        "panels": any(run.judges for run in runs),
    }


def report_conversations(runs: Sequence[ScoredRun]) -> Iterator[Any]:
    """The browser's data, as the parts of one JSON document ``{"conversations": [...], "answers":
    [[...] per run]}`` (strings are JSON text written as they are, other parts are values to encode):
    conversations once (prompt, rubric, themes), answers per run. Yielded one conversation or answer
    at a time, so that the report streams it into its gzip writer (a full run is ~56 MB of JSON).

    A conversation is ``{"id", "themes", "prompt": [[role, content], ...], "rubric": [[points,
    criterion, axis], ...]}``; an answer is ``{"c": conversation index, "r": repeat, "text",
    "score" (None when ungraded), "v": one letter per criterion (m met, n not met, u ungraded),
    "e": explanations}``.
    """
    index: dict[str, int] = {}
    yield '{"conversations":['
    for run in runs:
        for sample in run.samples:
            prompt_id = sample.conversation.prompt_id
            if prompt_id not in index:
                if index:
                    yield ","
                index[prompt_id] = len(index)
                yield _conversation_entry(sample)
    yield '],"answers":['
    for number, run in enumerate(runs):
        yield "[" if number == 0 else "],["
        for position, (sample, metrics) in enumerate(zip(run.samples, run.score.per_sample, strict=True)):
            if position:
                yield ","
            yield {
                "c": index[sample.conversation.prompt_id],
                "r": sample.repeat,
                "text": sample.completion,
                "score": None if metrics is None else metrics[OVERALL],
                "v": "".join(_VERDICT_CODES[v] for v in sample.verdicts),
                "e": list(sample.explanations) or [None] * len(sample.verdicts),
            }
    yield "]]}" if runs else "]}"


def _conversation_entry(sample: GradedSample) -> dict[str, Any]:
    conv = sample.conversation
    return {
        "id": conv.prompt_id,
        "themes": themes_of(conv.example_tags),
        "prompt": [[m.role, m.content] for m in conv.prompt],
        "rubric": [[item.points, item.criterion, _axis(item.tags)] for item in conv.rubrics],
    }


def _axis(tags: Sequence[str]) -> str | None:
    for tag in tags:  # (a plain loop: called once per criterion of every conversation)
        if tag.startswith("axis:"):
            return tag[5:]
    return None


MAX_FLIPS_SHOWN = 50


def comparison_summary(comparison: Comparison, gates: Sequence[GateDecision] = ()) -> dict[str, Any]:
    """A `healthbench.analysis.compare.Comparison` as the report embeds it: one row per group
    (overall, then themes, then axes), the flipped conversations, largest change first, and the
    decisions of the release ``gates`` asked for (`Comparison.gates`), if any."""
    rows = [
        {
            "kind": row.kind,
            "key": "overall" if row.kind == "all" else f"{row.kind}: {row.name}",
            "mean_a": row.result.mean_a,
            "mean_b": row.result.mean_b,
            "diff": row.result.difference,
            "lo": row.result.ci_lower,
            "hi": row.result.ci_upper,
            "p": row.result.p_value,
            "p_text": p_text(row.result.p_value, comparison.n_resamples),
            "p_holm": row.p_holm,
            "p_holm_text": "" if row.kind == "all" else p_text(row.p_holm, comparison.n_resamples),
            "clipped": row.result.clipped,
            "n": row.result.n,
            "verdict": row.verdict,
        }
        for row in comparison.rows
    ]
    flips = [
        {"id": f.prompt_id, "a": f.score_a, "b": f.score_b, "improved": f.improved}
        for f in comparison.flips[:MAX_FLIPS_SHOWN]
    ]
    return {
        "a": comparison.a,
        "b": comparison.b,
        "n_pairs": comparison.n_common,
        "margin": comparison.margin,
        "n_resamples": comparison.n_resamples,
        "verdict": comparison.verdict,
        "clipped": list(comparison.clipped_groups),
        "few": FEW_CONVERSATIONS,
        "warnings": list(comparison.warnings),
        "rows": rows,
        "flips": flips,
        "n_flips": len(comparison.flips),
        "n_improved": sum(1 for f in comparison.flips if f.improved),
        "gates": [
            {"option": g.option, "threshold": g.threshold, "passed": g.passed, "rule": g.rule} for g in gates
        ],
    }
