"""Multi-run tables as polars DataFrames: the granular criterion table, theme and axis scores with
bootstrap CIs per run, run-to-run spread per model, and per-conversation spread across repeats.

Definitions (as in the public Llama notebook, see docs/analysis.md):

- a conversation's theme score is its overall score (met points, negatives included, over positive
  points); its axis score is the same ratio over that axis's criteria, and a conversation with no
  positive points on an axis is left out of that axis; a sample with an ungraded criterion is left
  out everywhere;
- per (model, run_id, theme or axis), plus an ``all`` row (the overall score) in both tables: the
  mean, clipped to [0, 1], and the 95% CI: the 2.5 / 97.5 percentiles of ``n_resamples`` clipped
  bootstrap means, seeded (the one bootstrap, `healthbench.scoring.bootstrap`);
- per model across runs: the mean of the runs' ``all`` means, their standard deviation (ddof = 1,
  null for one run), min, max and the number of runs;
- per (model, conversation) across every graded repeat of every run of the model: the number of
  repeats k, the mean score and the worst (minimum) score;
- worst-at-k per (model, run_id) and, for a model of several runs, its runs pooled as repeats
  (run_id ``all``): the paper's curve for k = 1..n (`healthbench.scoring.worst_at_k`).

Every CI of a run with several answers of a conversation is over conversations (a drawn conversation
brings all its answers: `healthbench.scoring.bootstrap`); ``n_conversations`` says how many.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress

import numpy as np
import numpy.typing as npt
import polars as pl

from healthbench.analysis.inputs import UNGRADED_CODE, VERDICT_CODES, LoadedRun
from healthbench.analysis.scores import AXIS_PREFIX, THEME_PREFIX
from healthbench.scoring.rubric import OVERALL, Scored, Verdict
from healthbench.scoring.rubric_columns import Ints
from healthbench.scoring.run_score import RubricTable
from healthbench.scoring.stats import (
    BootstrapOptions,
    Column,
    KeyStats,
    aggregate_columns,
    conversation_clusters,
)
from healthbench.scoring.worst_at_k import GroupedScores, worst_at_k_curves

ALL = "all"
RUNS_PER_CALL = 32  # runs bootstrapped together (sharing draws); bounds the sums and means held at once
GRANULAR_SCHEMA = {
    "model": pl.String,
    "run_id": pl.String,
    "conversation_id": pl.String,
    "rubric_criterion_index": pl.Int64,
    "axis": pl.String,
    "points": pl.Float64,
    "criterion_met": pl.Boolean,
    "theme": pl.String,
    "repeat": pl.Int64,
    "verdict": pl.String,
}
GRANULAR_COLUMNS = tuple(GRANULAR_SCHEMA)
_STATS_SCHEMA = {
    "mean": pl.Float64,
    "lower_ci": pl.Float64,
    "upper_ci": pl.Float64,
    "n_samples": pl.Int64,
    "n_conversations": pl.Int64,
}


@dataclass(frozen=True)
class RunTable:
    """A run's per-sample scores (`healthbench.scoring.rubric.conversation_metrics`) as one `Column`
    per key (rows: the graded samples), per sample whether it is graded, and its ungraded criteria."""

    columns: dict[str, Column]
    graded: npt.NDArray[np.bool_]
    ungraded_criteria: int


@dataclass(frozen=True)
class RunMetrics:
    """A run's per-sample metrics, computed once."""

    run: LoadedRun
    table: RunTable
    one_answer_each: bool | None = None  # every sample of its own conversation (None: not known)

    @classmethod
    def of(cls, run: LoadedRun, rubrics: RubricTable | None = None, which: Ints | None = None) -> RunMetrics:
        """``run``'s metrics; ``rubrics`` (with ``which``, per answer its conversation's index there): the
        rubrics of its conversations flattened once for many runs (default: its own)."""
        answers = run.answers
        if rubrics is None or which is None:
            distinct, which = distinct_positions(answers.conversations)
            rubrics = RubricTable.of(distinct)
        graded = answers.graded  # (the spec's scores of every graded answer, as columns: `RubricTable`)
        met = (answers.verdicts == VERDICT_CODES[Verdict.MET])[np.repeat(graded, answers.n_items)]
        scores = rubrics.scores(which[graded], met.astype(np.float64))
        ungraded = int((answers.verdicts == UNGRADED_CODE).sum())
        table = RunTable(scores.columns(), graded, ungraded)
        prompt_ids = answers.prompt_ids
        return cls(run, table, len(set(prompt_ids)) == len(prompt_ids))


def run_metrics(runs: Sequence[LoadedRun]) -> list[RunMetrics]:
    """Every run's metrics (the rubrics of every conversation answered flattened once)."""
    conversations = [c for run in runs for c in run.answers.conversations]
    distinct, which = distinct_positions(conversations)
    rubrics = RubricTable.of(distinct)
    ends = np.cumsum([len(run.answers.conversations) for run in runs]).tolist()
    return [
        RunMetrics.of(run, rubrics, which[start:end])
        for run, start, end in zip(runs, [0, *ends], ends, strict=False)
    ]


def distinct_positions(conversations: Sequence[Scored]) -> tuple[list[Scored], Ints]:
    """The conversations answered (each object once, in first-answer order: runs of one dataset share
    them) and per answer its conversation's index among them."""
    ids = list(map(id, conversations))
    of_id = dict(zip(ids, conversations, strict=True))  # (in first-answer order)
    position = dict(zip(of_id, range(len(of_id)), strict=True))
    return list(of_id.values()), np.fromiter(map(position.__getitem__, ids), np.intp, len(ids))


# --- the granular table ---------------------------------------------------------------------------


def granular_frame(runs: Sequence[LoadedRun], *, enums: bool = False) -> pl.DataFrame:
    """One row per (model, run_id, conversation_id, repeat, rubric_criterion_index) of the samples the
    tables use: the criterion's axis (without ``axis:``), points, criterion_met, the conversation's
    theme (without ``theme:``), the repeat and the verdict (``met``, ``not_met``). A sample with an
    ungraded criterion is left out here as in every table (counted in `Analysis.warnings`), so
    ``criterion_met`` has no null and loads as a boolean column (polars, pandas).

    Built as columns: each distinct conversation's criteria are read once (runs of one dataset share
    them), and every row is gathered from them by index; the verdicts are the runs' columns. With
    ``enums`` the text columns are `pl.Enum`s of the few texts gathered (the same values, and the
    same CSV, for less work: what `healthbench.analysis.analyze.write_analysis` writes as TSV)."""
    text = _enum if enums else _strings
    answers = [run.answers for run in runs]
    conversations = [c for a in answers for c in a.conversations]
    distinct, which = distinct_positions(conversations)
    n_items = np.fromiter((len(c.rubrics) for c in distinct), np.intp, len(distinct))
    starts = np.cumsum(n_items) - n_items
    per_sample = n_items[which]
    # row r of the frame is criterion `within[r]` of distinct conversation `which` of its sample
    first_row = np.cumsum(per_sample) - per_sample
    within = np.arange(int(per_sample.sum()), dtype=np.intp) - np.repeat(first_row, per_sample)
    criterion = np.repeat(starts[which], per_sample) + within
    items = [item for c in distinct for item in c.rubrics]
    axes = text(_first_tags(map(_TAGS, items), AXIS_PREFIX))
    points = np.fromiter(map(_POINTS, items), np.float64, len(items))
    themes = text(_first_tags(map(_EXAMPLE_TAGS, distinct), THEME_PREFIX))
    prompt_ids = text([c.prompt_id for c in distinct])
    verdict = np.concatenate([a.verdicts for a in answers]) if answers else np.zeros(0, np.int8)
    sample_of = np.repeat(np.arange(len(conversations)), per_sample)
    run_of = np.repeat(np.arange(len(runs)), [len(a.conversations) for a in answers])[sample_of]
    sample_rows = which[sample_of]
    repeats = np.concatenate([a.repeats for a in answers]) if answers else np.zeros(0, np.int64)
    ungraded = np.zeros(len(conversations), dtype=bool)
    ungraded[sample_of[verdict == 2]] = True
    frame = pl.DataFrame(
        {
            "model": text([r.model for r in runs]).gather(run_of),
            "run_id": text([r.run_id for r in runs]).gather(run_of),
            "conversation_id": prompt_ids.gather(sample_rows),
            "rubric_criterion_index": pl.Series(within, dtype=pl.Int64),
            "axis": axes.gather(criterion),
            "points": pl.Series(points[criterion], dtype=pl.Float64),
            "criterion_met": pl.Series([True, False, None], dtype=pl.Boolean).gather(verdict),
            "theme": themes.gather(sample_rows),
            "repeat": pl.Series(repeats[sample_of], dtype=pl.Int64),
            "verdict": text(["met", "not_met", "ungraded"]).gather(verdict),
        },
        schema=None if enums else GRANULAR_SCHEMA,
    )
    return frame.filter(pl.Series(~ungraded[sample_of])) if ungraded.any() else frame


_TAGS, _POINTS, _EXAMPLE_TAGS = (operator.attrgetter(n) for n in ("tags", "points", "example_tags"))


def _strings(values: list[str | None]) -> pl.Series:
    return pl.Series(values, dtype=pl.String)


def _enum(values: list[str | None]) -> pl.Series:
    """``values`` as a `pl.Enum` of the distinct ones (in first-seen order)."""
    return pl.Series(values, dtype=pl.Enum([v for v in dict.fromkeys(values) if v is not None]))


def _first_tags(tag_lists: Iterable[Sequence[str]], prefix: str) -> list[str | None]:
    """Per tag list, its first tag with ``prefix`` (without it), or None."""
    out: list[str | None] = []
    size = len(prefix)
    for tags in tag_lists:
        for tag in tags:
            if tag.startswith(prefix):
                out.append(tag[size:])
                break
        else:
            out.append(None)
    return out


# --- theme and axis tables ------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreTables:
    """Per (model, run_id): the theme table (column ``theme``) and the axis table (column ``axis``),
    each with an ``all`` row first, then names in sorted order."""

    themes: pl.DataFrame
    axes: pl.DataFrame

    @property
    def combined(self) -> pl.DataFrame:
        """Both tables stacked: ``theme_or_axis`` (``theme`` or ``axis``) and ``theme_or_axis_name``."""
        parts = [
            frame.rename({name: "theme_or_axis_name"}).select(
                "model",
                "run_id",
                pl.lit(name, dtype=pl.String).alias("theme_or_axis"),
                "theme_or_axis_name",
                *_STATS_SCHEMA,
            )
            for name, frame in (("theme", self.themes), ("axis", self.axes))
        ]
        return pl.concat(parts)


def score_tables(runs: Sequence[RunMetrics], options: BootstrapOptions | None = None) -> ScoreTables:
    """The theme and axis tables of every run (module doc), CIs as ``options`` says (default
    `BootstrapOptions()`). The runs are bootstrapped together (`RUNS_PER_CALL` to a call): the keys
    of a call share the draws of their rows (each run's graded samples, row r its r-th)."""
    options = options or BootstrapOptions()
    every = _runs_stats(runs, options)
    themes: list[tuple[str, str, str, KeyStats]] = []
    axes: list[tuple[str, str, str, KeyStats]] = []
    for metrics, stats in zip(runs, every, strict=True):
        model, run_id = metrics.run.model, metrics.run.run_id
        for prefix, rows in ((THEME_PREFIX, themes), (AXIS_PREFIX, axes)):
            if OVERALL in stats:
                rows.append((model, run_id, ALL, stats[OVERALL]))
            names = sorted(k for k in stats if k.startswith(prefix))
            rows.extend((model, run_id, k.removeprefix(prefix), stats[k]) for k in names)
    return ScoreTables(_stats_frame(themes, "theme"), _stats_frame(axes, "axis"))


def _runs_stats(runs: Sequence[RunMetrics], options: BootstrapOptions) -> list[dict[str, KeyStats]]:
    """Each run's overall, theme and axis `KeyStats`, bootstrapped `RUNS_PER_CALL` runs to a call
    (rows: each run's graded samples; the resample means of a call are held at once); a run with
    several answers of a conversation gets conversation-level CIs (`conversation_clusters`)."""
    out: list[dict[str, KeyStats]] = [{} for _ in runs]
    for first in range(0, len(runs), RUNS_PER_CALL):
        columns: dict[tuple[int, str], Column] = {
            (run, key): column.in_clusters(clusters)
            for run, (table, clusters) in enumerate(
                ((m.table, _clusters(m)) for m in runs[first : first + RUNS_PER_CALL]), start=first
            )
            if OVERALL in table.columns
            for key, column in table.columns.items()
            if key == OVERALL or key.startswith(THEME_PREFIX) or key.startswith(AXIS_PREFIX)
        }
        n_rows = max((c.values.size for (_, key), c in columns.items() if key == OVERALL), default=0)
        for (run, key), key_stats in aggregate_columns(columns, n_rows, options=options).items():
            out[run][key] = key_stats
    return out


def _clusters(metrics: RunMetrics) -> npt.NDArray[np.intp] | None:
    """Per graded sample of the run, its conversation (`conversation_clusters`; None when each has
    one answer)."""
    if metrics.one_answer_each:
        return None
    mask = graded_mask(metrics.table)
    return conversation_clusters(list(compress(metrics.run.answers.prompt_ids, mask)))


def _stats_frame(rows: list[tuple[str, str, str, KeyStats]], name: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "model": [r[0] for r in rows],
            "run_id": [r[1] for r in rows],
            name: [r[2] for r in rows],
            "mean": [r[3].mean for r in rows],
            "lower_ci": [r[3].ci_lower for r in rows],
            "upper_ci": [r[3].ci_upper for r in rows],
            "n_samples": [r[3].n_samples for r in rows],
            "n_conversations": [r[3].n_conversations for r in rows],
        },
        schema={"model": pl.String, "run_id": pl.String, name: pl.String, **_STATS_SCHEMA},
    )


# --- across runs and repeats ----------------------------------------------------------------------


def model_runs_frame(tables: ScoreTables) -> pl.DataFrame:
    """Per model, across its runs' overall (``all``) means: mean, std (ddof 1), min, max, n_runs."""
    overall = tables.themes.filter(pl.col("theme") == ALL)
    return (
        overall.group_by("model", maintain_order=True)
        .agg(
            pl.col("mean").mean().alias("mean"),
            pl.col("mean").std(ddof=1).alias("std"),
            pl.col("mean").min().alias("min"),
            pl.col("mean").max().alias("max"),
            pl.len().cast(pl.Int64).alias("n_runs"),
        )
        .sort("model", maintain_order=True)
    )


SAMPLE_SCHEMA = {
    "model": pl.String,
    "run_id": pl.String,
    "conversation_id": pl.String,
    "repeat": pl.Int64,
    "score": pl.Float64,
}


def sample_scores_frame(runs: Sequence[RunMetrics]) -> pl.DataFrame:
    """One row per graded sample: model, run_id, conversation_id, repeat and its overall score."""
    return pl.concat([_graded_samples(m) for m in runs] or [pl.DataFrame(schema=SAMPLE_SCHEMA)])


def _graded_samples(metrics: RunMetrics) -> pl.DataFrame:
    run, answers = metrics.run, metrics.run.answers
    mask = np.asarray(graded_mask(metrics.table), dtype=bool)
    n = int(mask.sum())
    overall = metrics.table.columns[OVERALL].values if n else np.zeros(0)
    ids = pl.Series(answers.prompt_ids, dtype=pl.String)
    return pl.DataFrame(
        {
            "model": pl.Series([run.model], dtype=pl.String).new_from_index(0, n),
            "run_id": pl.Series([run.run_id], dtype=pl.String).new_from_index(0, n),
            "conversation_id": ids.filter(pl.Series(mask)),
            "repeat": pl.Series(answers.repeats[mask], dtype=pl.Int64),
            "score": pl.Series(overall, dtype=pl.Float64),
        },
        schema=SAMPLE_SCHEMA,
    )


def graded_mask(table: RunTable) -> list[bool]:
    """Per sample: whether it is graded (has no ungraded criterion)."""
    mask: list[bool] = table.graded.tolist()
    return mask


def conversation_repeats_frame(samples: pl.DataFrame) -> pl.DataFrame:
    """Per (model, conversation_id), over every graded repeat of every run of the model: ``k``,
    ``mean`` and ``worst_at_k`` (the minimum score)."""
    return (
        samples.group_by("model", "conversation_id", maintain_order=True)
        .agg(
            pl.len().cast(pl.Int64).alias("k"),
            pl.col("score").mean().alias("mean"),
            pl.col("score").min().alias("worst_at_k"),
        )
        .sort("model", "conversation_id", maintain_order=True)
    )


WORST_AT_K_COLUMNS = ("model", "run_id", "k", "worst_at_k", "lower_ci", "upper_ci", "n_conversations")


def worst_at_k_frame(samples: pl.DataFrame, options: BootstrapOptions | None = None) -> pl.DataFrame:
    """The paper's worst-at-k curve (`healthbench.scoring.worst_at_k`) of every (model, run_id) of
    ``samples`` (`sample_scores_frame`), then of every model of several runs with its runs pooled as
    repeats (run_id ``all``): one row per k = 1..n with the clipped figure, its CI over conversations
    (as ``options`` says) and the conversations with at least k graded answers."""
    curves: list[tuple[str, str, pl.DataFrame]] = [
        (str(model), str(run_id), part)
        for (model, run_id), part in samples.group_by("model", "run_id", maintain_order=True)
    ]
    runs_per_model = samples.group_by("model", maintain_order=True).agg(pl.col("run_id").n_unique())
    for model, n_runs in runs_per_model.iter_rows():
        if n_runs > 1:
            curves.append((str(model), ALL, samples.filter(pl.col("model") == model)))
    points = worst_at_k_curves(
        [
            GroupedScores.of(part["conversation_id"].to_numpy(), part["score"].to_numpy())
            for *_, part in curves
        ],
        options,
    )
    rows = [
        (model, run_id, p.k, p.worst_at_k, p.ci_lower, p.ci_upper, p.n_conversations)
        for (model, run_id, _), curve in zip(curves, points, strict=True)
        for p in curve
    ]
    schema = dict(
        zip(
            WORST_AT_K_COLUMNS,
            (pl.String, pl.String, pl.Int64, pl.Float64, pl.Float64, pl.Float64, pl.Int64),
            strict=True,
        )
    )
    return pl.DataFrame(rows, schema=schema, orient="row").sort("model", "run_id", "k", maintain_order=True)


def ungraded_counts(runs: Sequence[RunMetrics]) -> list[tuple[str, int, int]]:
    """(run label, ungraded criteria, samples left out) for every run with ungraded criteria."""
    out = []
    for metrics in runs:
        left_out = graded_mask(metrics.table).count(False)
        if metrics.table.ungraded_criteria or left_out:
            out.append((metrics.run.label, metrics.table.ungraded_criteria, left_out))
    return out
