"""Meta-eval runs of several judges written straight into a store (no judge is called): our own rows of
two categories, and each member's verdicts and costs chosen by the test (tests/test_panel_meta_*.py)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

from healthbench.config import build_config
from healthbench.runner.meta_eval import prepare_meta_eval, row_id
from healthbench.scoring.meta import MetaRow
from healthbench.scoring.verdict import Verdict
from healthbench.store.runs import GradeRow, GradeStatus, RunStatus, Store

M, N, U = Verdict.MET, Verdict.NOT_MET, Verdict.UNGRADED
CATEGORIES = ("cluster:sleep_advice", "cluster:hedging_no-uncertainty_hedges")
STATUS = {M: GradeStatus.MET, N: GradeStatus.NOT_MET, U: GradeStatus.UNGRADED}
URL = "http://127.0.0.1:9/v1"  # never called: the grades are written by the test


def meta_rows(n: int = 90, seed: int = 7) -> list[dict]:
    """``n`` rows (our own text) of two categories, two to four physicians of six each, labels drawn."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        k = rng.randint(2, 4)
        physicians = rng.sample([f"p{j}" for j in range(6)], k)
        truth = rng.random() < 0.55
        labels = [truth if rng.random() < 0.8 else not truth for _ in physicians]
        rows.append(
            {
                "prompt": [{"role": "user", "content": f"Question {i} about sleep."}],
                "completion": f"Answer {i}: keep a regular bedtime.",
                "rubric": f"Mentions a regular schedule ({i}).",
                "category": CATEGORIES[i % 2],
                "binary_labels": labels,
                "anonymized_physician_ids": physicians,
                "prompt_id": f"m{i}",
                "completion_id": f"c{i}",
            }
        )
    return rows


def write_rows(path: Path, rows: Sequence[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def drawn_verdicts(rows: Sequence[dict], error: float, seed: int) -> list[Verdict]:
    """A judge that flips the physicians' majority (ties: met) with probability ``error``; every 17th
    row ungraded."""
    rng = random.Random(seed)
    out = []
    for i, row in enumerate(rows):
        labels = row["binary_labels"]
        truth = 2 * sum(labels) >= len(labels)
        flipped = truth if rng.random() >= error else not truth
        out.append(U if i % 17 == seed % 17 else Verdict.of(flipped))
    return out


def stored_panel_meta(
    store: Store,
    path: Path,
    verdicts: Mapping[str, Sequence[Verdict]],
    *,
    costs: Mapping[str, Sequence[float | None]] | None = None,
    cached: Mapping[str, Sequence[bool]] | None = None,
    name: str = "meta",
) -> None:
    """A finished meta-eval run of the panel ``verdicts`` (labels in panel order; one judge: a
    single-judge run) on the rows of ``path``, each grade with its cost and call-cache flag."""
    judges = [{"spec": label, "base_url": URL} for label in verdicts]
    panel = {"judges": judges} if len(judges) > 1 else {"judge": judges[0]}
    config = build_config({"dataset": "meta_eval", "data": str(path), "model": None, **panel})
    run = prepare_meta_eval(store, config, name, environ={"OPENAI_API_KEY": "sk-test"})
    records = [item for _, item in store.load_items(run.id)]
    grades = [
        GradeRow(
            row_id_of(record),
            0,
            {"input_tokens": 100, "output_tokens": 10},
            (costs or {}).get(label, [None] * len(records))[i],
            (cached or {}).get(label, [False] * len(records))[i],
            None,
            0,
            STATUS[votes[i]],
            None,
            1,
            judge=label,
        )
        for label, votes in verdicts.items()
        for i, record in enumerate(records)
    ]
    store.put(run.id, grades=grades)
    store.set_status(run.id, RunStatus.FINISHED)


def row_id_of(record: dict) -> str:
    from healthbench.data.schema import MetaEvalRecord

    return row_id(MetaEvalRecord.model_validate(record))


def as_meta_rows(rows: Sequence[dict]) -> list[MetaRow]:
    """What the metrics take of each row: its category and physicians' labels."""
    return [
        MetaRow(r["category"], tuple(r["binary_labels"]), tuple(r["anonymized_physician_ids"])) for r in rows
    ]
