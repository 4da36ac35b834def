"""Generated graded runs for the analysis tests: themes, axes, mixed points, a chosen hit rate."""

from __future__ import annotations

import random

from helpers import build_conversation

from healthbench.analysis.inputs import LoadedRun
from healthbench.data.schema import Conversation, RubricItem
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample

THEMES = ("emergency_referrals", "hedging", "global_health")
AXES = ("accuracy", "completeness", "communication_quality")


def conversations(n: int, *, seed: int = 0) -> list[Conversation]:
    """``n`` conversations, 2-6 criteria each (points -5..10, the first two positive), one theme."""
    rng = random.Random(seed)
    out = []
    for index in range(n):
        items = []
        for number in range(rng.randint(2, 6)):
            points = rng.choice([-5, -2, 3, 5, 7, 10]) if number > 1 else rng.choice([5, 7, 10])
            items.append(
                RubricItem(
                    criterion=f"criterion {number}",
                    points=points,
                    tags=[f"axis:{rng.choice(AXES)}", "level:example"],
                )
            )
        theme = f"theme:{THEMES[index % len(THEMES)]}"
        out.append(
            build_conversation(
                items, prompt_id=f"conv-{index:04d}", example_tags=[theme], question=f"question {index}"
            )
        )
    return out


def graded(
    convs: list[Conversation],
    *,
    hit_rate: float = 0.6,
    seed: int = 1,
    repeats: int = 1,
    ungraded: float = 0.0,
) -> list[GradedSample]:
    """Each criterion met with probability ``hit_rate`` (ungraded with probability ``ungraded``)."""
    rng = random.Random(seed)
    out = []
    for repeat in range(repeats):
        for conv in convs:
            verdicts = tuple(
                Verdict.UNGRADED if rng.random() < ungraded else Verdict.of(rng.random() < hit_rate)
                for _ in conv.rubrics
            )
            out.append(GradedSample(conv, f"answer {repeat}", verdicts, repeat=repeat))
    return out


def loaded(
    samples: list[GradedSample], model: str = "model-a", run_id: str = "run-1", **extra: object
) -> LoadedRun:
    source = f"generated:{run_id}"  # two runs are two inputs (compare warns of one input twice)
    return LoadedRun(model=model, run_id=run_id, samples=tuple(samples), source=source, **extra)  # type: ignore[arg-type]


def reference_scores(samples: list[GradedSample]) -> list[dict[str, float] | None]:
    """Per sample, plain Python from the definitions: ``overall`` = met points / positive points;
    ``axis:X`` = the same over the criteria tagged axis X, only when they have positive points;
    None when a criterion is ungraded."""
    out: list[dict[str, float] | None] = []
    for sample in samples:
        if any(v is Verdict.UNGRADED for v in sample.verdicts):
            out.append(None)
            continue
        items = list(zip(sample.conversation.rubrics, sample.verdicts, strict=True))
        scores = {"overall": _ratio(items)}
        for axis in {t for item, _ in items for t in item.tags if t.startswith("axis:")}:
            ratio = _ratio([(item, v) for item, v in items if axis in item.tags])
            if ratio is not None:
                scores[axis] = ratio
        out.append(scores)
    return out


def _ratio(items: list[tuple[RubricItem, Verdict]]) -> float | None:
    possible = sum(item.points for item, _ in items if item.points > 0)
    if possible == 0:
        return None
    return sum(item.points for item, v in items if v is Verdict.MET) / possible
