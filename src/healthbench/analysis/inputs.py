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
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from healthbench.data.schema import Conversation
from healthbench.defaults import DEFAULT_READ_WORKERS
from healthbench.errors import DataError, RunError
from healthbench.results.allresults_columns import AnswerColumns, read_answers_of_files
from healthbench.results.simple_evals import (
    Interned,
    answer_conversations,
    dataset_rubrics,
    load_allresults,
)
from healthbench.scoring.rubric import verdict_codes
from healthbench.scoring.run_score import GradedSample

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


@dataclass(frozen=True)
class RunAnswers:
    """A run's answers as columns, what the tables read: per answer its conversation (runs read from
    one dataset share these objects) and repeat; per criterion its verdict code
    (`healthbench.scoring.rubric.VERDICT_CODES`; the answers' criteria one after another)."""

    conversations: list[Conversation]
    repeats: npt.NDArray[np.int64]
    verdicts: npt.NDArray[np.int8]
    n_items: npt.NDArray[np.intp]  # per answer, its number of criteria (its conversation's)

    @cached_property
    def prompt_ids(self) -> list[str]:
        """Per answer, its conversation's prompt_id."""
        return [c.prompt_id for c in self.conversations]

    @classmethod
    def of(cls, samples: Sequence[GradedSample]) -> RunAnswers:
        n_items = np.fromiter((len(s.verdicts) for s in samples), np.intp, len(samples))
        return cls(
            [s.conversation for s in samples],
            np.fromiter((s.repeat for s in samples), np.int64, len(samples)),
            verdict_codes(chain.from_iterable(s.verdicts for s in samples), int(n_items.sum())),
            n_items,
        )

    @cached_property
    def graded(self) -> npt.NDArray[np.bool_]:
        """Per answer: whether it has no ungraded criterion."""
        answer_of = np.repeat(np.arange(len(self.conversations)), self.n_items)
        ungraded = np.bincount(answer_of[self.verdicts == 2], minlength=len(self.conversations))
        graded: npt.NDArray[np.bool_] = ungraded == 0
        return graded

    @cached_property
    def distinct(self) -> list[Conversation]:
        """The conversations answered (each object once, in first-answer order)."""
        return list(dict(zip(map(id, self.conversations), self.conversations, strict=True)).values())


class FileSamples(Sequence[GradedSample]):
    """A file's graded samples, read (`load_allresults`, the same ``interned`` as its columns) on first
    use: `healthbench analyze` reads its files as columns and never needs them."""

    def __init__(
        self,
        path: str,
        data: Mapping[str, Conversation] | None,
        allow_untagged: bool,
        interned: Interned,
        n: int,
    ) -> None:
        self._read = (path, data, allow_untagged, interned)
        self._n = n

    @cached_property
    def _samples(self) -> tuple[GradedSample, ...]:
        path, data, allow_untagged, interned = self._read
        return tuple(load_allresults(path, data, allow_missing=allow_untagged, interned=interned).samples)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> GradedSample: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[GradedSample]: ...
    def __getitem__(self, index: int | slice) -> GradedSample | Sequence[GradedSample]:
        return self._samples[index]

    def __iter__(self) -> Iterator[GradedSample]:
        return iter(self._samples)


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
    columns: RunAnswers | None = field(default=None, repr=False, compare=False)  # as read (else: samples)
    # a stored run's calls, tokens and cost per role (None: the input does not record them)
    usage: UsageTotals | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        return f"{self.model}/{self.run_id}"

    @cached_property
    def answers(self) -> RunAnswers:
        """The answers as columns (as read, or from the samples)."""
        return self.columns if self.columns is not None else RunAnswers.of(self.samples)

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
    data: Mapping[str, Conversation] | None = None,
    data_sha256: str | None = None,
    allow_untagged: bool = False,
    model: str | None = None,
    run_id: str | None = None,
    columns_only: bool = False,
    workers: int | None = DEFAULT_READ_WORKERS,
    meanwhile: Callable[[], object] | None = None,
) -> list[LoadedRun]:
    """Every run named by ``inputs``, in order: an existing file is an ``_allresults.json``, an
    existing folder gives its ``*_allresults.json`` files (sorted), anything else is a stored run name
    or a glob pattern over the store's eval runs.

    ``data`` (the dataset by prompt_id, see `healthbench.data.sources.join_datasets`) gives files
    their example tags, as ``healthbench import`` does; ``data_sha256`` is recorded as their dataset
    version. ``model`` overrides every run's model; ``run_id`` the run id of the single run loaded.
    Two runs with the same model and run id are an error (they would be merged in every table).

    With ``columns_only`` files are read as columns (`RunAnswers`; their samples are read again if
    ever used), one file per worker process (``workers`` at once; see
    `healthbench.results.allresults_columns.read_answers_of_files`; None: its `read_workers`): what
    ``analyze`` needs. ``meanwhile`` is called once, while worker processes read the files (else
    before they are read): ``analyze`` imports its tables' modules there.
    """
    entries: list[Path | Callable[[], LoadedRun]] = []  # a file, or a stored run's loader
    for spec in inputs:
        entries.extend(_resolve(str(spec), store))
    files = [e for e in entries if isinstance(e, Path)]
    interned = Interned()  # runs of the same conversations share them (their layout is read once)
    if columns_only:
        read = _column_runs(files, data, data_sha256, allow_untagged, interned, workers, meanwhile)
    else:
        if meanwhile is not None:
            meanwhile()
        read = [
            load_file(f, data, data_sha256=data_sha256, allow_untagged=allow_untagged, interned=interned)
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
    if looks_like_path(spec):
        raise DataError("no such file or folder", path=spec)
    if store is None:
        raise DataError("no such file or folder (and no store to look up a run of that name)", path=spec)
    return [partial(load_stored, store, run) for run in _stored_runs(store, spec)]


def _column_runs(
    files: Sequence[Path],
    data: Mapping[str, Conversation] | None,
    data_sha256: str | None,
    allow_untagged: bool,
    interned: Interned,
    workers: int | None,
    meanwhile: Callable[[], object] | None,
) -> list[LoadedRun]:
    """The files' runs read as columns (`load_inputs`)."""
    rubric_of = dataset_rubrics(data, interned)
    read = read_answers_of_files(
        files, rubric_of, allow_missing=allow_untagged, workers=workers, meanwhile=meanwhile
    )
    return [
        column_run(
            path, answers, data, data_sha256=data_sha256, allow_untagged=allow_untagged, interned=interned
        )
        for path, answers in zip(files, read, strict=True)
    ]


def column_run(
    path: str | os.PathLike[str],
    answers: AnswerColumns,
    data: Mapping[str, Conversation] | None,
    *,
    data_sha256: str | None,
    allow_untagged: bool,
    interned: Interned,
) -> LoadedRun:
    """The run of a file read as columns (its samples read again on first use, as `load_file`)."""
    name = parse_file_name(path)
    conversations = answer_conversations(answers, data, interned)
    return LoadedRun(
        model=name.model,
        run_id=name.run_id,
        samples=FileSamples(str(path), data, allow_untagged, interned, len(conversations)),
        source=str(path),
        dataset_variant=name.variant,
        dataset_sha256=data_sha256,
        reported=dict(answers.metrics),
        columns=RunAnswers(conversations, answers.repeats, answers.verdicts, answers.n_items),
    )


def looks_like_path(spec: str) -> bool:
    """A spec naming a file or folder (a ``.json`` name or a path separator), never a stored run."""
    return spec.endswith(".json") or os.sep in spec or (os.altsep is not None and os.altsep in spec)


def needs_store(specs: Iterable[str | os.PathLike[str]]) -> bool:
    """Whether any spec can only be a stored run (so a store must be opened)."""
    return any(not Path(s).exists() and not looks_like_path(str(s)) for s in specs)


def load_file(
    path: str | os.PathLike[str],
    data: Mapping[str, Conversation] | None = None,
    *,
    data_sha256: str | None = None,
    allow_untagged: bool = False,
    interned: Interned | None = None,
) -> LoadedRun:
    """One simple-evals ``_allresults.json`` (errors name the file, the example and the field);
    files read with the same ``interned`` share their rebuilt conversations."""
    parsed = load_allresults(path, data, allow_missing=allow_untagged, interned=interned)
    name = parse_file_name(path)
    return LoadedRun(
        model=name.model,
        run_id=name.run_id,
        samples=tuple(parsed.samples),
        source=str(path),
        dataset_variant=name.variant,
        dataset_sha256=data_sha256,
        reported=dict(parsed.metrics),
    )


def load_stored(store: Store, run: RunRecord) -> LoadedRun:
    """One stored eval run, read through `healthbench.results.views.RunView`; missing grades are
    ungraded criteria."""
    from healthbench.results.views import RunView

    view = RunView.of(store, run).require_kind("eval")
    return stored_run(view, view.graded_samples())


def stored_run(view: RunView, samples: Sequence[GradedSample]) -> LoadedRun:
    """A stored eval run whose ``samples`` were already read from ``view``."""
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
        grading_setup=json.dumps(grading_setup(view.record), sort_keys=True),
        usage=view.usage_totals(),
    )


def grading_setup_warning(setups: Sequence[str | None], labels: Sequence[str]) -> str | None:
    """One line when runs that record their grading setup record different ones (what differs, and
    which runs), else None; runs that record none are skipped."""
    known = [(json.loads(s), label) for s, label in zip(setups, labels, strict=True) if s is not None]
    if not known:
        return None
    from healthbench.results.correction import setup_differences  # (stored runs only: loads the store)

    first, first_label = known[0]
    for setup, label in known[1:]:
        differs = setup_differences(first, setup)
        if differs:
            return (
                f"the runs used different judge setups ({', '.join(differs)} differ: "
                f"{first_label} vs {label}); their verdicts are not comparable"
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
