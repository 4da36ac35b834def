"""`healthbench analyze` as a library call: every table of `healthbench.analysis.tables` for a set of
runs, the warnings a reader needs (ungraded criteria, runs on different datasets), and the files.

Files written to the output folder (``.parquet`` instead of ``.csv`` / ``.tsv`` with ``parquet``):
``healthbench_granular_data_YYYYMMDD.tsv``, ``theme_data.csv``, ``axis_data.csv``,
``theme_axis_data.csv``, ``model_runs.csv``, ``conversation_repeats.csv`` and ``worst_at_k.csv``.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import polars as pl

from healthbench.analysis.inputs import LoadedRun, grading_setup_warning
from healthbench.analysis.tables import (
    ScoreTables,
    conversation_repeats_frame,
    granular_frame,
    model_runs_frame,
    run_metrics,
    sample_scores_frame,
    score_tables,
    ungraded_counts,
    worst_at_k_frame,
)
from healthbench.atomic import make_folder
from healthbench.scoring.stats import BootstrapOptions


@dataclass(frozen=True)
class Analysis:
    runs: tuple[LoadedRun, ...]
    tables: ScoreTables
    models: pl.DataFrame  # per model across runs
    samples: pl.DataFrame  # per graded sample: its overall score
    conversations: pl.DataFrame  # per (model, conversation) across repeats
    worst_at_k: pl.DataFrame  # per (model, run_id or all, k): the paper's worst-at-k curve
    warnings: tuple[str, ...]

    @property
    def themes(self) -> pl.DataFrame:
        return self.tables.themes

    @property
    def axes(self) -> pl.DataFrame:
        return self.tables.axes

    def granular(self, *, enums: bool = False) -> pl.DataFrame:
        """The criterion-level table (built on demand: one row per graded criterion; text columns as
        `pl.Enum`s with ``enums``, see `granular_frame`)."""
        return granular_frame(self.runs, enums=enums)


def analyze(runs: Sequence[LoadedRun], options: BootstrapOptions | None = None) -> Analysis:
    """Every table for ``runs`` (see `healthbench.analysis.tables` for the definitions), CIs as
    ``options`` says (default `BootstrapOptions()`)."""
    metrics = run_metrics(runs)
    tables = score_tables(metrics, options)
    samples = sample_scores_frame(metrics)
    warnings = [
        f"{label}: {criteria} criteria ungraded; {left_out} sample(s) with one are left out of every table"
        for label, criteria, left_out in ungraded_counts(metrics)
    ]
    warnings.extend(theme_warnings(runs))
    warnings.extend(setting_warnings(runs))
    return Analysis(
        runs=tuple(runs),
        tables=tables,
        models=model_runs_frame(tables),
        samples=samples,
        conversations=conversation_repeats_frame(samples),
        worst_at_k=worst_at_k_frame(samples, options),
        warnings=tuple(warnings),
    )


def theme_warnings(runs: Sequence[LoadedRun]) -> list[str]:
    """Runs none of whose conversations has a ``theme:`` tag: no theme row can be computed for them
    (a simple-evals file stores no example tags; `--data` / `--dataset` give them)."""
    untagged = [
        run.label
        for run in runs
        if run.answers.conversations
        and not any(t.startswith("theme:") for c in run.answers.distinct for t in c.example_tags)
    ]
    if not untagged:
        return []
    return [
        f"no theme can be computed for {', '.join(untagged)}: their conversations carry no example tags "
        "(a simple-evals file stores none); give the dataset with --data or --dataset"
    ]


def setting_warnings(runs: Sequence[LoadedRun]) -> list[str]:
    """Runs graded differently (judges, grader prompts, dataset variants or versions, profiles, as far
    as recorded), and prompt_ids whose rubric differs between runs: such numbers are not comparable."""
    out: list[str] = []
    for what, values in (
        ("judges", [r.judge for r in runs]),
        ("grader prompts (template sha256)", [r.grader_template_sha256 for r in runs]),
        ("dataset variants", [r.dataset_variant for r in runs]),
        ("dataset versions (sha256)", [r.dataset_sha256 for r in runs]),
        ("profiles", [r.profile for r in runs]),
    ):
        counts = Counter(v for v in values if v is not None)
        if len(counts) > 1:
            shown = ", ".join(f"{v} ({n} runs)" for v, n in counts.most_common())
            out.append(f"the runs use different {what}: {shown}; compare like with like")
    setup = grading_setup_warning([r.grading_setup for r in runs], [r.label for r in runs])
    if setup is not None:
        out.append(setup)
    rubrics: dict[str, object] = {}
    differing: set[str] = set()
    seen: set[tuple[int, ...]] = set()  # runs of the same conversation objects are read once
    for run in runs:
        key = tuple(map(id, run.answers.distinct))
        if key in seen:
            continue
        seen.add(key)
        for conversation in run.answers.distinct:
            known = rubrics.setdefault(conversation.prompt_id, conversation.rubrics)
            if known is not conversation.rubrics and known != conversation.rubrics:
                differing.add(conversation.prompt_id)
    if differing:
        out.append(
            f"{len(differing)} conversation(s) have different rubrics in different runs (different "
            "datasets or versions): their scores are not comparable across those runs"
        )
    return out


def output_names(day: dt.date, *, parquet: bool = False) -> dict[str, str]:
    """The file name of every table written by `write_analysis`."""
    csv = "parquet" if parquet else "csv"
    return {
        "granular": f"healthbench_granular_data_{day:%Y%m%d}.{'parquet' if parquet else 'tsv'}",
        "themes": f"theme_data.{csv}",
        "axes": f"axis_data.{csv}",
        "combined": f"theme_axis_data.{csv}",
        "models": f"model_runs.{csv}",
        "conversations": f"conversation_repeats.{csv}",
        "worst_at_k": f"worst_at_k.{csv}",
    }


_QUOTED = frozenset('"\r\n')  # (with the separator) what polars quotes in a text field, and ""


def quote_style(frame: pl.DataFrame, separator: str) -> Literal["necessary", "never"]:
    """``never`` when no field of ``frame`` is quoted by polars' ``necessary`` style: every text
    column is a `pl.Enum` of texts that need no quotes (not empty, no separator, quote or line
    break). The same bytes, written without polars looking at every field."""
    texts = []
    for dtype in frame.schema.values():
        if dtype == pl.String or dtype == pl.Categorical:
            return "necessary"
        if isinstance(dtype, pl.Enum):
            texts.extend(dtype.categories.to_list())
    special = _QUOTED | {separator}
    plain = all(texts) and not any(special.intersection(text) for text in texts)
    return "never" if plain else "necessary"


def write_analysis(
    analysis: Analysis,
    out: str | os.PathLike[str],
    *,
    parquet: bool = False,
    day: dt.date | None = None,
) -> dict[str, Path]:
    """Write every table into ``out`` (created if needed); the day in the granular file's name is
    today (UTC) unless given. Each file is written to a temporary name and renamed."""
    folder = make_folder(out)
    names = output_names(day or dt.datetime.now(dt.UTC).date(), parquet=parquet)
    frames = {
        "granular": analysis.granular(enums=not parquet),
        "themes": analysis.themes,
        "axes": analysis.axes,
        "combined": analysis.tables.combined,
        "models": analysis.models,
        "conversations": analysis.conversations,
        "worst_at_k": analysis.worst_at_k,
    }
    written: dict[str, Path] = {}
    for key, frame in frames.items():
        target = folder / names[key]
        temporary = target.with_name(f".{target.name}.tmp")
        if parquet:
            frame.write_parquet(temporary)
        else:
            separator = "\t" if key == "granular" else ","
            frame.write_csv(temporary, separator=separator, quote_style=quote_style(frame, separator))
        temporary.replace(target)
        written[key] = target
    return written
