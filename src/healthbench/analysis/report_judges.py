"""The report's "Judges" section of a run graded by a panel of judges (docs/panels.md, docs/report.md),
as plain JSON-able data: each member's own scores, how much the members agree (``judge_agreement``,
Fleiss' kappa, pairwise Cohen's kappa) and where they disagree most: by theme, by axis, and the
criteria with the most split votes. Pure: the members' samples in, figures out (`scoring.panel`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from healthbench.analysis.report_data import stat_entry
from healthbench.data.shapes import themes_of
from healthbench.scoring.panel import agreement, fleiss_kappa, pairwise_cohen_kappa
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run
from healthbench.scoring.verdict import Verdict

MAX_SPLITS_SHOWN = 200  # the criteria with the most split votes listed in the report
_CODES = {Verdict.MET: "m", Verdict.NOT_MET: "n", Verdict.UNGRADED: "u"}


def judges_summary(
    samples: Sequence[GradedSample],
    members: Sequence[Mapping[str, GradedSample]],
    *,
    rule: str,
    options: ScoringOptions | None = None,
) -> dict[str, Any]:
    """The section's data: ``samples`` are the panel's (its verdicts by ``rule``), ``members[i]`` the
    members' own samples of ``samples[i]`` (by label, the chair first)."""
    labels = list(members[0]) if members else []
    votes: list[tuple[Verdict, ...]] = []
    themes: dict[str, list[tuple[Verdict, ...]]] = defaultdict(list)
    axes: dict[str, list[tuple[Verdict, ...]]] = defaultdict(list)
    splits: list[dict[str, Any]] = []
    for sample, own in zip(samples, members, strict=True):
        conversation = sample.conversation
        for index, item in enumerate(conversation.rubrics):
            criterion = tuple(own[label].verdicts[index] for label in labels)
            votes.append(criterion)
            for theme in themes_of(conversation.example_tags):
                themes[theme].append(criterion)
            for tag in item.tags:
                if tag.startswith("axis:"):
                    axes[tag[5:]].append(criterion)
            met, not_met = criterion.count(Verdict.MET), criterion.count(Verdict.NOT_MET)
            if met and not_met:
                splits.append(
                    {
                        "id": conversation.prompt_id,
                        "r": sample.repeat,
                        "criterion": item.criterion,
                        "points": item.points,
                        "votes": "".join(_CODES[v] for v in criterion),
                        "panel": _CODES[sample.verdicts[index]],
                        "minority": min(met, not_met),
                    }
                )
    splits.sort(key=lambda s: (-s["minority"], -abs(s["points"]), s["id"], s["r"]))
    kappas = pairwise_cohen_kappa(labels, votes)
    return {
        "rule": rule,
        "members": [_member(label, [own[label] for own in members], options) for label in labels],
        "agreement": agreement(votes),
        "fleiss_kappa": fleiss_kappa(votes),
        "graded_by_all": sum(Verdict.UNGRADED not in criterion for criterion in votes),
        "pairwise": [
            [None if a == b else kappas.get((a, b), kappas.get((b, a))) for b in labels] for a in labels
        ],
        "by_theme": _disagreement(themes),
        "by_axis": _disagreement(axes),
        "splits": splits[:MAX_SPLITS_SHOWN],
        "n_splits": len(splits),
    }


def _member(label: str, samples: Sequence[GradedSample], options: ScoringOptions | None) -> dict[str, Any]:
    score = score_run(samples, options)
    return {
        "label": label,
        "overall": stat_entry(score.stats.get(OVERALL)),
        "axes": {
            key[5:]: stats.mean
            for key, stats in sorted(score.stats.items())
            if key.startswith("axis:") and key.count(":") == 1
        },
    }


def _disagreement(groups: Mapping[str, Sequence[tuple[Verdict, ...]]]) -> list[dict[str, Any]]:
    """Per group: the share of its criteria graded by every member on which they did not all agree
    (1 − ``judge_agreement`` within the group) and how many such criteria; most disagreement first."""
    rows: list[tuple[float, str, int]] = []
    for name, votes in groups.items():
        share = agreement(votes)
        graded = sum(Verdict.UNGRADED not in criterion for criterion in votes)
        rows.append((-1.0 if share is None else 1 - share, name, graded))
    rows.sort(key=lambda row: (-row[0], row[1]))
    return [
        {"name": name, "disagreement": None if share < 0 else share, "n": graded}
        for share, name, graded in rows
    ]
