"""Analysis inputs: stored runs (by name or glob pattern) and simple-evals ``_allresults.json`` files
(or folders of them), each loaded as a `LoadedRun`: who answered, which run, the graded samples, and
what defines the grading (judge, grader prompt, dataset, profile) so comparisons can warn.

A file's model and run id come from simple-evals' file name
``healthbench[_VARIANT]_MODEL_YYYYMMDD_HHMMSS[SUFFIX]_allresults.json``: model ``MODEL``, run id
``YYYYMMDD_HHMMSS[SUFFIX]`` and dataset variant ``VARIANT`` (``full`` when absent). Any other name
gives the file's stem as model and run id. Both can be overridden.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from itertools import chain, islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from healthbench.errors import DataError, RunError
from healthbench.results.allresults_reader import DatasetRubrics
from healthbench.results.simple_evals import (
    VERDICTS,
    Answers,
    Interned,
    dataset_rubrics,
    load_allresults,
    load_answers,
)
from healthbench.scoring.rubric import Scored
from healthbench.scoring.run_score import GradedSample
from healthbench.scoring.verdict import Verdict

if TYPE_CHECKING:  # the store is loaded only for stored runs (files are read without it)
    from healthbench.results.views import RunView, UsageTotals
    from healthbench.store.runs import RunRecord, Store

ALLRESULTS_SUFFIX = "_allresults.json"
_FILE_NAME = re.compile(
    r"^healthbench(?:_(?P<variant>hard|consensus))?_(?P<model>.+?)_(?P<stamp>\d{8}_\d{6})(?P<extra>.*)"
    + re.escape(ALLRESULTS_SUFFIX)
    + "$"
)
_GLOB_CHARS = frozenset("*?[")
VERDICT_CODES = {Verdict.MET: 0, Verdict.NOT_MET: 1, Verdict.UNGRADED: 2}  # a verdict's code in `RunAnswers`
UNGRADED_CODE = VERDICT_CODES[Verdict.UNGRADED]
_MET_CODES = {met: VERDICT_CODES[verdict] for met, verdict in VERDICTS.items()}  # criteria_met -> code
_VERDICT_OF = {code: verdict for verdict, code in VERDICT_CODES.items()}


@dataclass(frozen=True)
class RunAnswers:
    """A run's answers as columns, what the tables read: per answer its conversation (runs read from
    one dataset share these objects) and repeat; per criterion its verdict code (`VERDICT_CODES`; the
    answers' criteria one after another)."""

    conversations: list[Scored]
    repeats: npt.NDArray[np.int64]
    verdicts: npt.NDArray[np.int8]
    n_items: npt.NDArray[np.intp]  # per answer, its number of criteria (its conversation's)

    @cached_property
    def prompt_ids(self) -> list[str]:
        """Per answer, its conversation's prompt_id."""
        return [c.prompt_id for c in self.conversations]

    @classmethod
    def of(cls, samples: Sequence[GradedSample]) -> RunAnswers:
        if isinstance(samples, AnswerSamples):  # (a file read as columns)
            return samples.answers
        n_items = np.fromiter((len(s.verdicts) for s in samples), np.intp, len(samples))
        return cls(
            [s.conversation for s in samples],
            np.fromiter((s.repeat for s in samples), np.int64, len(samples)),
            np.fromiter(
                map(VERDICT_CODES.__getitem__, chain.from_iterable(s.verdicts for s in samples)),
                np.int8,
                int(n_items.sum()),
            ),
            n_items,
        )

    @classmethod
    def read(cls, answers: Answers) -> RunAnswers:
        """A file's answers (`healthbench.results.simple_evals.load_answers`)."""
        return cls(
            answers.conversations,
            np.array(answers.repeats, np.int64),
            np.fromiter(map(_MET_CODES.__getitem__, answers.met), np.int8, len(answers.met)),
            np.array(answers.n_items, np.intp),
        )

    @cached_property
    def graded(self) -> npt.NDArray[np.bool_]:
        """Per answer: whether it has no ungraded criterion."""
        answer_of = np.repeat(np.arange(len(self.conversations)), self.n_items)
        ungraded = np.bincount(answer_of[self.verdicts == UNGRADED_CODE], minlength=len(self.conversations))
        graded: npt.NDArray[np.bool_] = ungraded == 0
        return graded

    @cached_property
    def distinct(self) -> list[Scored]:
        """The conversations answered (each object once, in first-answer order)."""
        return list(dict(zip(map(id, self.conversations), self.conversations, strict=True)).values())


class AnswerSamples(Sequence[GradedSample]):
    """A run read as columns (`RunAnswers`) seen as its graded samples, built on first use: no
    completion, explanation, prompt messages nor usage (a file read without texts, as
    `load_allresults` reads it)."""

    def __init__(self, answers: RunAnswers) -> None:
        self.answers = answers

    @cached_property
    def samples(self) -> tuple[GradedSample, ...]:
        answers = self.answers
        verdicts = iter(map(_VERDICT_OF.__getitem__, answers.verdicts.tolist()))
        return tuple(
            GradedSample(conversation, "", tuple(islice(verdicts, n)), repeat=repeat)
            for conversation, n, repeat in zip(
                answers.conversations, answers.n_items.tolist(), answers.repeats.tolist(), strict=True
            )
        )

    def __len__(self) -> int:
        return len(self.answers.conversations)

    def __iter__(self) -> Iterator[GradedSample]:
        return iter(self.samples)

    @overload
    def __getitem__(self, index: int) -> GradedSample: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[GradedSample, ...]: ...
    def __getitem__(self, index: int | slice) -> GradedSample | tuple[GradedSample, ...]:
        return self.samples[index]

    def __eq__(self, other: object) -> bool:
        return self.samples == (other.samples if isinstance(other, AnswerSamples) else other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class LoadedRun:
    """One run ready for analysis. The grading fields are None when the input does not record them
    (a simple-evals file records no judge nor grader prompt)."""

    model: str
    run_id: str
    samples: Sequence[GradedSample]
    source: str  # the file path, or ``store:RUN_NAME``
    judge: str | None = None
    grader_template_sha256: str | None = None
    dataset_variant: str | None = None
    dataset_sha256: str | None = None
    profile: str | None = None
    reported: Mapping[str, Any] = field(default_factory=dict)  # the metrics the file itself reports
    # the full grading setup (`healthbench.results.correction.grading_setup`), as canonical JSON
    grading_setup: str | None = None
    # a stored run's calls, tokens and cost per role (None: the input does not record them)
    usage: UsageTotals | None = field(default=None, repr=False, compare=False)
    # a panel of judges' run: each sample's members' own samples (by label, the chair first) and the rule
    # that made ``samples``' verdicts (None: one judge; the report's "Judges" section)
    members: Sequence[Mapping[str, GradedSample]] | None = field(default=None, repr=False, compare=False)
    panel_rule: str | None = None

    @property
    def label(self) -> str:
        return f"{self.model}/{self.run_id}"

    @cached_property
    def answers(self) -> RunAnswers:
        """The answers as columns."""
        return RunAnswers.of(self.samples)

    @property
    def ungraded_samples(self) -> int:
        return int((~self.answers.graded).sum())


@dataclass(frozen=True)
class FileName:
    """What a simple-evals file name says about its run."""

    model: str
    run_id: str
    variant: str | None


def parse_file_name(path: str | os.PathLike[str]) -> FileName:
    """Model, run id and dataset variant from a simple-evals ``_allresults.json`` name (module doc)."""
    name = Path(path).name
    match = _FILE_NAME.match(name)
    if match is None:
        stem = name.removesuffix(ALLRESULTS_SUFFIX).removesuffix(".json")
        return FileName(stem, stem, None)
    return FileName(match["model"], match["stamp"] + match["extra"], match["variant"] or "full")


def load_inputs(
    inputs: Sequence[str | os.PathLike[str]],
    *,
    store: Store | None = None,
    data: Mapping[str, Scored] | None = None,
    data_sha256: str | None = None,
    allow_untagged: bool = False,
    model: str | None = None,
    run_id: str | None = None,
    texts: bool = True,
) -> list[LoadedRun]:
    """Every run named by ``inputs``, in order: an existing file is an ``_allresults.json``, an
    existing folder gives its ``*_allresults.json`` files (sorted), anything else is a stored run name
    or a glob pattern over the store's eval runs.

    ``data`` (the dataset by prompt_id, see `healthbench.data.sources.join_datasets`) gives files
    their example tags, as ``healthbench import`` does; ``data_sha256`` is recorded as their dataset
    version. ``model`` overrides every run's model; ``run_id`` the run id of the single run loaded.
    Two runs with the same model and run id are an error (they would be merged in every table).
    Without ``texts`` files are read without their completions, usage and explanations (`load_file`).
    """
    entries: list[Path | Callable[[], LoadedRun]] = []  # a file, or a stored run's loader
    for spec in inputs:
        entries.extend(_resolve(str(spec), store))
    files = [e for e in entries if isinstance(e, Path)]
    interned = Interned()  # runs of the same conversations share them
    rubrics = dataset_rubrics(data) if files else None  # (and the dataset's rubrics, as the reader checks)
    read = [
        load_file(
            f,
            data,
            data_sha256=data_sha256,
            allow_untagged=allow_untagged,
            interned=interned,
            texts=texts,
            rubrics=rubrics,
        )
        for f in files
    ]
    file_runs = iter(read)
    runs = [next(file_runs) if isinstance(e, Path) else e() for e in entries]
    if not runs:
        raise DataError("no runs to analyse: give _allresults.json files, folders or stored run names")
    if run_id is not None and len(runs) > 1:
        raise DataError(f"--run-id names one run, but the inputs hold {len(runs)} runs")
    runs = [_renamed(r, model, run_id) for r in runs]
    _check_unique(runs)
    return runs


def _resolve(spec: str, store: Store | None) -> Sequence[Path | Callable[[], LoadedRun]]:
    """The files, or else the loaders of the stored runs, that ``spec`` names."""
    path = Path(spec)
    files = [path] if path.is_file() else sorted(path.glob(f"*{ALLRESULTS_SUFFIX}")) if path.is_dir() else []
    if path.is_dir() and not files:
        raise DataError(f"no *{ALLRESULTS_SUFFIX} file in this folder", path=spec)
    if files:
        return files
    if store is None:
        raise DataError("no such file or folder (and no store to look up a run of that name)", path=spec)
    if looks_like_path(spec) and store.get_run(spec) is None:  # a run may be named "team/nightly"
        raise DataError(f"no such file or folder, nor a run of that name in {store.url}", path=spec)
    return [partial(load_stored, store, run) for run in _stored_runs(store, spec)]


def looks_like_path(spec: str) -> bool:
    """A spec that was probably meant as a file or folder (a ``.json`` name or a path separator):
    when it is neither on disk nor a stored run, the error says "no such file or folder"."""
    return spec.endswith(".json") or os.sep in spec or (os.altsep is not None and os.altsep in spec)


def needs_store(specs: Iterable[str | os.PathLike[str]]) -> bool:
    """Whether any spec may be a stored run (so a store must be opened): the one rule of every command
    that takes runs (`report`, `compare`, `analyze`): an existing file or folder is read as one,
    anything else is a stored run name (``team/nightly`` too) or a glob over them."""
    return any(not Path(s).exists() for s in specs)


def only_paths_missing(specs: Iterable[str | os.PathLike[str]]) -> bool:
    """Whether every spec not on disk looks like a path (without a store, "no such file" says it best)."""
    return all(looks_like_path(str(s)) for s in specs if not Path(s).exists())


def load_file(
    path: str | os.PathLike[str],
    data: Mapping[str, Scored] | None = None,
    *,
    data_sha256: str | None = None,
    allow_untagged: bool = False,
    interned: Interned | None = None,
    texts: bool = True,
    rubrics: DatasetRubrics | None = None,
) -> LoadedRun:
    """One simple-evals ``_allresults.json`` (errors name the file, the example and the field);
    files read with the same ``interned`` share their rebuilt conversations. Without ``texts`` the
    samples hold no completion, usage nor explanation (what the tables need: `load_answers`, which
    checks the rubrics against ``rubrics``, `dataset_rubrics` of ``data`` made once for many files)."""
    samples: Sequence[GradedSample]
    if texts:
        parsed = load_allresults(path, data, allow_missing=allow_untagged, interned=interned)
        samples, metrics = tuple(parsed.samples), parsed.metrics
    else:  # (columns, no sample per answer)
        answers = load_answers(path, data, allow_missing=allow_untagged, interned=interned, rubrics=rubrics)
        samples, metrics = AnswerSamples(RunAnswers.read(answers)), answers.metrics
    name = parse_file_name(path)
    return LoadedRun(
        model=name.model,
        run_id=name.run_id,
        samples=samples,
        source=str(path),
        dataset_variant=name.variant,
        dataset_sha256=data_sha256,
        reported=dict(metrics),
    )


def load_stored(store: Store, run: RunRecord) -> LoadedRun:
    """One stored eval run, read through `healthbench.results.views.RunView`; missing grades are
    ungraded criteria."""
    from healthbench.results.views import RunView

    view = RunView.of(store, run).require_kind("eval")
    if view.is_panel:
        stored = list(view.iter_samples())
        return stored_run(view, [s.graded for s in stored], [s.members for s in stored])
    return stored_run(view, view.graded_samples())


def stored_run(
    view: RunView,
    samples: Sequence[GradedSample],
    members: Sequence[Mapping[str, GradedSample]] | None = None,
) -> LoadedRun:
    """A stored eval run whose ``samples`` were already read from ``view`` (``members``: a panel's
    members' own samples beside them)."""
    from healthbench.results.correction import grading_setup

    dataset = view.dataset
    return LoadedRun(
        model=view.model_spec or view.name,
        run_id=view.name,
        samples=tuple(samples),
        source=f"store:{view.name}",
        judge=view.judge_spec,
        grader_template_sha256=view.grader_template_sha256,
        dataset_variant=dataset.get("variant"),
        dataset_sha256=dataset.get("sha256"),
        profile=view.config.profile,
        grading_setup=json.dumps(grading_setup(view.record, view.panel_rule), sort_keys=True),
        usage=view.usage_totals(),
        members=members,
        panel_rule=view.panel_rule if members is not None else None,
    )


def grading_setup_warning(setups: Sequence[str | None], labels: Sequence[str]) -> str | None:
    """One line when runs that record their grading setup record different ones (what differs, and
    which runs; when a panel is one of them, who graded each: its members in order and its rule),
    else None; runs that record none are skipped."""
    known = [(json.loads(s), label) for s, label in zip(setups, labels, strict=True) if s is not None]
    if not known:
        return None
    # (stored runs only: loads the store)
    from healthbench.results.correction import setup_differences, setup_judges

    first, first_label = known[0]
    for setup, label in known[1:]:
        differs = setup_differences(first, setup)
        if differs:
            panel = "judges" in first or "judges" in setup
            who = f", graded by {setup_judges(first)} vs {setup_judges(setup)}" if panel else ""
            return (
                f"the runs used different judge setups ({', '.join(differs)} differ: "
                f"{first_label} vs {label}{who}); their verdicts are not comparable"
            )
    return None


def _stored_runs(store: Store, spec: str) -> list[RunRecord]:
    if not _GLOB_CHARS.intersection(spec):
        return [store.require_run(spec)]
    matched = [r for r in store.list_runs() if r.kind == "eval" and fnmatch.fnmatchcase(r.name, spec)]
    if not matched:
        raise RunError(f"no eval run in {store.url} matches {spec!r}; `healthbench runs` lists them")
    return matched


def _renamed(run: LoadedRun, model: str | None, run_id: str | None) -> LoadedRun:
    if model is None and run_id is None:
        return run
    return replace(run, model=model or run.model, run_id=run_id or run.run_id)


def _check_unique(runs: Iterable[LoadedRun]) -> None:
    seen: dict[tuple[str, str], str] = {}
    for run in runs:
        key = (run.model, run.run_id)
        if key in seen:
            raise DataError(
                f"{seen[key]} and {run.source} are both model {run.model!r} run {run.run_id!r}; "
                "give each input once (or override the model / run id)"
            )
        seen[key] = run.source


def merge_runs(runs: Sequence[LoadedRun]) -> LoadedRun:
    """Several runs as one (their samples as repeats, numbered on from run to run), e.g. every run of a
    model for a paired comparison of models. A grading field the runs disagree on becomes None."""
    if not runs:
        raise DataError("no runs to merge")
    if len(runs) == 1:
        return runs[0]
    samples: list[GradedSample] = []
    offset = 0
    for run in runs:
        samples.extend(replace(s, repeat=s.repeat + offset) for s in run.samples)
        offset += 1 + max((s.repeat for s in run.samples), default=0)
    models = list(dict.fromkeys(r.model for r in runs))

    def common(name: str) -> Any:
        values = {getattr(r, name) for r in runs}
        return values.pop() if len(values) == 1 else None

    return LoadedRun(
        model="+".join(models),
        run_id=f"{len(runs)} runs",
        samples=tuple(samples),
        source=", ".join(r.source for r in runs),
        judge=common("judge"),
        grader_template_sha256=common("grader_template_sha256"),
        dataset_variant=common("dataset_variant"),
        dataset_sha256=common("dataset_sha256"),
        profile=common("profile"),
        grading_setup=common("grading_setup"),
    )
