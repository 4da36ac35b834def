"""The one reader of simple-evals' ``_allresults.json``: one msgspec schema validates the whole file
in one batch, then the few rules a schema cannot say (one completion message, texts are strings, a
rubric joined with the dataset is the dataset's, an example without a dataset entry is a valid
conversation) are checked over the decoded structs. Every failure is a `DataError` naming the file,
the example and the field (``metadata.example_level_metadata[3].rubric_items[1].points``).

Three views are built from the same decode: `read_columns` (flat criterion columns straight into
`healthbench.scoring.rubric.columns_metrics`, no object per answer: ``import``), `read_answers`
(per-answer and per-criterion arrays: ``analyze``) and
`healthbench.results.simple_evals.load_allresults` (one `GradedSample` per answer: ``report``,
``compare``, the service's import jobs). The two columns views decode the schema without the
graders' explanations (`Answer`; an explanation may be any JSON, so the checks are the same). A
source is a path, or the file's bytes or text with a ``name`` for messages (the service reads
uploads without writing them to disk).
"""

from __future__ import annotations

import multiprocessing
import operator
import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any, Generic, TypeVar, get_args, overload

import msgspec
import numpy as np
import numpy.typing as npt

from healthbench.data.jsonl import Source, decode_text, load_json, source_bytes, utf8_bytes
from healthbench.data.roles import Role
from healthbench.data.rubric_index import IndexedConversation
from healthbench.data.shapes import (
    CRITERION,
    NULL,
    POINTS,
    TAGS,
    Message,
    Points,
    is_object_or_null,
    is_text,
    prompt_problem,
    rubric_problem,
)
from healthbench.defaults import AUTO_READ_FREE_CORES, AUTO_READ_MB, AUTO_READ_WORKERS, DEFAULT_READ_WORKERS
from healthbench.errors import DataError
from healthbench.scoring.rubric import VERDICT_CODES, MetricTable, Verdict, columns_metrics

EXAMPLES = "metadata.example_level_metadata"
ROLES = frozenset(get_args(Role))


class Criterion(msgspec.Struct, gc=False):
    """A graded criterion as the columns views read it (a grader's explanation is skipped, not
    decoded: it may be any JSON)."""

    criterion: str
    points: Points
    tags: list[str]
    criteria_met: bool | None


class Item(Criterion, gc=False):
    """A graded criterion with its explanation (the samples view)."""

    explanation: msgspec.Raw = NULL  # any JSON (graders sometimes return structured explanations)


class Answer(msgspec.Struct, gc=False):
    """An example as the columns views read it (its criteria without explanations)."""

    prompt_id: str
    rubric_items: Sequence[Criterion]
    prompt: list[Message]
    completion: list[Message]
    usage: msgspec.Raw = NULL  # an object or null (checked, not decoded)


class Example(Answer, gc=False):
    """An example with its criteria's explanations (the samples view)."""

    rubric_items: Sequence[Item]


AnswerT = TypeVar("AnswerT", bound=Answer)


class _Metadata(msgspec.Struct, Generic[AnswerT], gc=False):
    example_level_metadata: list[AnswerT]


class _File(msgspec.Struct, Generic[AnswerT], gc=False):
    metadata: _Metadata[AnswerT]
    score: float | None = None
    metrics: dict[str, Any] = msgspec.field(default_factory=dict)


# the one schema, with explanations (`Example`) or without (`Answer`: the same checks, less decoded)
_DECODERS: dict[type[Answer], msgspec.json.Decoder[Any]] = {
    Example: msgspec.json.Decoder(_File[Example]),
    Answer: msgspec.json.Decoder(_File[Answer]),
}
VERDICTS = {True: Verdict.MET, False: Verdict.NOT_MET, None: Verdict.UNGRADED}  # criteria_met -> verdict
CODES = {met: VERDICT_CODES.index(v) for met, v in VERDICTS.items()}  # criteria_met -> its verdict's code
_ITEMS, _MET, _PROMPT, _COMPLETION, _USAGE, _CONTENT, _CRITERION = map(
    operator.attrgetter,
    ("rubric_items", "criteria_met", "prompt", "completion", "usage", "content", "criterion"),
)
Triples = list[tuple[str, float, list[str]]]  # a rubric as (criterion, points, tags) per criterion
_TRIPLE = operator.attrgetter("criterion", "points", "tags")


@dataclass(frozen=True)
class Decoded(Generic[AnswerT]):
    """A valid file: its examples (in file order) and the numbers it reports."""

    source: str
    examples: list[AnswerT]
    score: float | None
    metrics: dict[str, Any]
    unjoined: list[int]  # the examples with no dataset entry (every one when read without a dataset)
    verdicts: npt.NDArray[np.int8]  # per criterion (the examples' one after another): its `CODES`


@overload
def decode_allresults(
    source: Source,
    rubric_of: Callable[[str], Triples | None] | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
) -> Decoded[Example]: ...
@overload
def decode_allresults(
    source: Source,
    rubric_of: Callable[[str], Triples | None] | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
    shape: type[AnswerT],
) -> Decoded[AnswerT]: ...
def decode_allresults(
    source: Source,
    rubric_of: Callable[[str], Triples | None] | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
    shape: type[Answer] = Example,
) -> Decoded[Any]:
    """Read and check a file (module doc). With ``rubric_of`` (the dataset's rubric of a prompt_id,
    None when absent) each example's rubric must be the dataset's, and a prompt_id absent from the
    dataset is an error unless ``allow_missing``. ``name`` names ``source`` in errors (default: the
    path; ``<bytes>`` for data). ``shape`` `Answer` skips the explanations (the same checks: an
    explanation may be any JSON)."""
    data, label = source_bytes(source, name)
    try:  # (msgspec passes bad bytes inside the texts it keeps raw; ASCII, as json.dump writes, is UTF-8)
        data = data if data.isascii() else utf8_bytes(data)
    except UnicodeDecodeError:
        raise json_error(data, label) or DataError("not valid UTF-8", path=label) from None
    try:
        document = _DECODERS[shape].decode(data)
    except msgspec.ValidationError as exc:
        # a document json cannot read either (a 5,000-digit number, nesting too deep) is named as such
        # rather than by the schema (error path only: the file is parsed again)
        undecodable = json_error(data, label)
        raise (_schema_error(str(exc), label) if undecodable is None else undecodable) from None
    except msgspec.DecodeError as exc:
        raise json_error(data, label) or DataError(f"invalid JSON ({exc})", path=label) from None
    examples = document.metadata.example_level_metadata
    if not examples:
        raise DataError(f"the file holds no graded example ({EXAMPLES} is empty)", path=label)
    if not _all_valid(examples):  # (one pass over the whole file; `_check_all` names the culprit)
        _check_all(examples, label)
    missing: list[str] = []
    unjoined: list[int] = []
    met: list[bool | None] = []  # every criterion's criteria_met, in file order
    first_of: dict[str, tuple[int, Sequence[Criterion]]] = {}  # prompt_id -> its first example
    for index, example in enumerate(examples):
        # (each example's criteria are read here, while they are in cache, instead of in file-wide
        # passes: an empty criterion is `_check_example`'s, which every error below defers to)
        rubric = example.rubric_items
        met.extend(map(_MET, rubric))
        if not all(map(str.strip, map(_CRITERION, rubric))):
            _check_all(examples, label)
        first, items = first_of.setdefault(example.prompt_id, (index, rubric))
        if items is not rubric and list(map(_TRIPLE, items)) != list(map(_TRIPLE, rubric)):
            _check_all(examples, label)
            raise DataError(
                f"prompt_id {example.prompt_id!r} is also example {first} with another rubric: answers "
                "to one prompt_id are pooled as repeats, so their rubrics must be the same",
                path=label,
                field=f"{EXAMPLES}[{index}].rubric_items",
            )
        expected = rubric_of(example.prompt_id) if rubric_of is not None else None
        if expected is None:
            if rubric_of is not None:
                missing.append(example.prompt_id)
            try:
                check_conversation(example, label, f"{EXAMPLES}[{index}]")
            except DataError:
                _check_all(examples, label)
                raise
            unjoined.append(index)
        elif list(map(_TRIPLE, rubric)) != expected:
            _check_all(examples, label)
            raise DataError(
                f"the rubric stored for prompt_id {example.prompt_id} differs from the dataset's "
                f"({len(rubric)} vs {len(expected)} criteria); join the dataset "
                "variant the run used",
                path=label,
                field=f"{EXAMPLES}[{index}].rubric_items",
            )
    if missing and not allow_missing:
        shown = ", ".join(dict.fromkeys(missing[:5]))
        raise DataError(
            f"{len(set(missing))} prompt_id(s) are not in the dataset given ({shown}); pass "
            "the dataset the run used (--allow-untagged keeps them without example tags)",
            path=label,
        )
    codes = np.fromiter(map(CODES.__getitem__, met), np.int8, len(met))
    return Decoded(label, examples, document.score, document.metrics, unjoined, codes)


def json_error(data: bytes, source: str) -> DataError | None:
    """The error of bytes that are not one JSON document, from the one place decode failures are
    mapped (`healthbench.data.jsonl.decode_text` and `load_json`: the byte that is not UTF-8, or
    invalid JSON with its line and column); None when json reads them."""
    try:
        load_json(decode_text(data, source=source), source=source)
    except DataError as exc:
        return exc
    return None


_SCHEMA_MESSAGE = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<at>.*)`)?$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")
_EXPECTED = re.compile(r"^Expected `(?P<expected>[^`]+)`(?P<bound>.*?), got `(?P<got>[^`]+)`$")
_TYPE_NAMES = {
    "str": "a string",
    "int | float": "a number",
    "float": "a number",
    "int": "a number",
    "bool": "a boolean",
    "null": "null",
    "object": "an object",
    "array": "a list",
    "bool | null": "true, false or null",
    "float | null": "a number or null",
}


def _schema_error(message: str, source: str) -> DataError:
    """msgspec's validation message as ours: what was expected, what was found, at which field."""
    match = _SCHEMA_MESSAGE.match(message)
    what, at = (match["what"], (match["at"] or "").lstrip(".")) if match else (message, "")
    missing = _MISSING.match(what)
    if (missing and missing["name"] in ("metadata", "example_level_metadata") and at in ("", "metadata")) or (
        at == "metadata" and what.startswith("Expected `object`")
    ):
        return DataError(
            f"not a HealthBench result file: it has no {EXAMPLES} (simple-evals writes it only for "
            "HealthBench; is this another benchmark's _allresults.json?)",
            path=source,
        )
    if missing:
        return DataError("missing field", path=source, field=".".join(filter(None, (at, missing["name"]))))
    expected = _EXPECTED.match(what)
    if expected:
        wanted = _TYPE_NAMES.get(expected["expected"], expected["expected"])
        got = _TYPE_NAMES.get(expected["got"], expected["got"])
        bound = expected["bound"].strip()
        reason = f"expected {wanted}{' ' + bound if bound else ''}, got {got}"
        if not at:
            return DataError(f"expected a JSON object, got {got}", path=source)
        return DataError(reason, path=source, field=at)
    if what.startswith("Expected `") and "`" in what[10:]:  # a bound alone: ``Expected `int` >= -10``
        wanted, _, bound = what[10:].partition("`")
        reason = f"expected {_TYPE_NAMES.get(wanted, wanted)} {bound.strip()}".rstrip()
        return DataError(reason, path=source, field=at or None)
    return DataError(what[:1].lower() + what[1:], path=source, field=at or None)


def raw_kind(raw: msgspec.Raw) -> str:
    """The JSON type of raw JSON, as errors name it."""
    first = bytes(memoryview(raw)[:1])
    return {b'"': "a string", b"{": "an object", b"[": "a list", b"n": "null", b"t": "a boolean"}.get(
        first, "a boolean" if first == b"f" else "a number"
    )


def _all_valid(examples: list[Answer]) -> bool:
    """`_check_example` of every example at once but for the criteria (`decode_allresults` reads
    those example by example), in iterators that never enter Python code."""
    every = chain.from_iterable
    return (
        all(map(is_text, map(_CONTENT, every(map(_PROMPT, examples)))))
        and all(map(len, map(_PROMPT, examples)))
        and all(map((1).__eq__, map(len, map(_COMPLETION, examples))))
        and all(map(is_text, map(_CONTENT, every(map(_COMPLETION, examples)))))
        and all(map(is_object_or_null, map(_USAGE, examples)))
    )


def _check_all(examples: list[Answer], source: str) -> None:
    """`_check_example` of every example in order: the first problem is raised (it comes before any
    other problem of the file)."""
    for index, example in enumerate(examples):
        _check_example(example, source, f"{EXAMPLES}[{index}]")


def _check_example(example: Answer, source: str, where: str) -> None:
    _check_texts(example.prompt, source, f"{where}.prompt")
    if not example.prompt:
        raise DataError("the prompt has no messages", path=source, field=f"{where}.prompt")
    _check_texts(example.completion, source, f"{where}.completion")
    if len(example.completion) != 1:
        raise DataError(
            f"expected exactly one completion message, got {len(example.completion)}",
            path=source,
            field=f"{where}.completion",
        )
    if not is_object_or_null(example.usage):
        raise DataError(
            f"expected an object or null, got {raw_kind(example.usage)}", path=source, field=f"{where}.usage"
        )
    for number, item in enumerate(example.rubric_items):
        if not item.criterion.strip():
            raise DataError(
                "the criterion is empty", path=source, field=f"{where}.rubric_items[{number}].criterion"
            )


def _check_texts(messages: Sequence[Message], source: str, field: str) -> None:
    """Every message's content is a string, else a `DataError` naming ``field[number].content``."""
    for number, message in enumerate(messages):
        if not is_text(message.content):
            raise DataError(
                f"expected a string, got {raw_kind(message.content)}",
                path=source,
                field=f"{field}[{number}].content",
            )


def check_conversation(example: Answer, source: str, where: str) -> None:
    """The rules of `healthbench.data.schema.Conversation` for an example read without a dataset
    entry (its conversation is rebuilt from the file)."""
    for number, message in enumerate(example.prompt):
        if message.role not in ROLES:
            raise DataError(
                f"unknown role {message.role!r} (expected one of {', '.join(sorted(ROLES))})",
                path=source,
                field=f"{where}.prompt[{number}].role",
            )
    items = example.rubric_items
    rules = (
        ("prompt", prompt_problem(example.prompt)),
        ("rubric_items", rubric_problem(list(map(CRITERION, items)), list(map(POINTS, items)))),
    )
    for name, found in rules:  # (the dataset reader's rules: `healthbench.data.shapes`)
        if found is not None:
            at = f"[{found[0]}].criterion" if found[0] else ""
            raise DataError(found[1], path=source, field=f"{where}.{name}{at}")


# --- the columnar view (import) ------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnarResults:
    """The per-answer metrics of a file, the numbers it reports, and its answers' prompt_ids and
    lengths (in file order)."""

    table: MetricTable
    score: float | None
    metrics: dict[str, Any]
    prompt_ids: list[str]
    completions: list[msgspec.Raw]  # each answer's text as raw JSON

    def completion_lengths(self) -> list[int]:
        """Each answer's length in characters (decodes the answers)."""
        return list(map(len, texts(self.completions)))


def read_columns(
    source: Source,
    dataset: Mapping[str, IndexedConversation] | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
) -> ColumnarResults:
    """The file's metrics, with example tags from ``dataset`` (joined on prompt_id); errors as
    `decode_allresults`."""
    rubric_of = None
    if dataset is not None:
        triples: dict[str, Triples] = {}

        def rubric_of(prompt_id: str) -> Triples | None:
            entry = dataset.get(prompt_id)
            if entry is None:
                return None
            known = triples.get(prompt_id)
            if known is None:
                known = triples[prompt_id] = [(r.criterion, r.points, r.tags) for r in entry.rubric]
            return known

    decoded = decode_allresults(source, rubric_of, allow_missing=allow_missing, name=name, shape=Answer)
    examples = decoded.examples
    items = list(chain.from_iterable(map(_ITEMS, examples)))
    known = [dataset.get(e.prompt_id) for e in examples] if dataset is not None else [None] * len(examples)
    table = columns_metrics(
        [len(e.rubric_items) for e in examples],
        list(map(POINTS, items)),
        list(map(VERDICT_CODES.__getitem__, decoded.verdicts.tolist())),
        list(map(TAGS, items)),
        [() if k is None else k.example_tags for k in known],
    )
    if table is None:  # positive points are checked above: only a batch with too many distinct tags
        raise DataError("too many distinct tags to score in one batch", path=decoded.source)
    return ColumnarResults(
        table=table,
        score=decoded.score,
        metrics=decoded.metrics,
        prompt_ids=[e.prompt_id for e in examples],
        completions=[e.completion[0].content for e in examples],
    )


def texts(raws: Sequence[msgspec.Raw]) -> list[str]:
    """Raw JSON strings (checked by `is_text`) decoded, in one call."""
    return msgspec.json.decode(b"[" + b",".join(raws) + b"]", type=list[str])


# --- the answers view (analyze), read in worker processes ---------------------------------------

Prompt = tuple[tuple[str, str], ...]  # the messages as sent, as (role, text)


@dataclass(frozen=True)
class AnswerColumns:
    """A file's answers as columns, with no object per answer or criterion (compact to send back from
    a worker process): per answer its prompt_id and number of criteria; per criterion its verdict
    code (`CODES`; the answers' criteria one after another); for each answer with no dataset entry
    (every answer of a file read without a dataset), by its index, its prompt and rubric, to rebuild
    its conversation from; and the numbers the file reports."""

    source: str
    prompt_ids: list[str]
    repeats: npt.NDArray[np.int64]  # answers to one prompt_id are numbered 0, 1, ... in file order
    n_items: npt.NDArray[np.intp]
    verdicts: npt.NDArray[np.int8]
    unjoined: dict[int, tuple[Prompt, Triples]]
    score: float | None
    metrics: dict[str, Any]


def read_answers(
    source: Source,
    rubric_of: Callable[[str], Triples | None] | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
) -> AnswerColumns:
    """The file's `AnswerColumns`; checks and errors as `decode_allresults`."""
    decoded = decode_allresults(source, rubric_of, allow_missing=allow_missing, name=name, shape=Answer)
    examples = decoded.examples
    unjoined = [examples[i] for i in decoded.unjoined]
    contents = texts([m.content for e in unjoined for m in e.prompt])  # (one call for every prompt)
    prompts: dict[int, tuple[Prompt, Triples]] = {}
    start = 0
    for index, example in zip(decoded.unjoined, unjoined, strict=True):
        end = start + len(example.prompt)
        roles = (m.role for m in example.prompt)
        prompt = tuple(zip(roles, contents[start:end], strict=True))
        prompts[index] = (prompt, list(map(_TRIPLE, example.rubric_items)))
        start = end
    prompt_ids = [e.prompt_id for e in examples]
    seen: dict[str, int] = {}  # prompt_id -> its answers so far
    repeats = []
    for prompt_id in prompt_ids:
        repeat = seen[prompt_id] = seen.get(prompt_id, -1) + 1
        repeats.append(repeat)
    return AnswerColumns(
        source=decoded.source,
        prompt_ids=prompt_ids,
        repeats=np.array(repeats, dtype=np.int64),
        n_items=np.fromiter(map(len, map(_ITEMS, examples)), np.intp, len(examples)),
        verdicts=decoded.verdicts,
        unjoined=prompts,
        score=decoded.score,
        metrics=decoded.metrics,
    )


def read_answers_of_files(
    paths: Sequence[str | os.PathLike[str]],
    rubric_of: Callable[[str], Triples | None] | None = None,
    *,
    allow_missing: bool = False,
    workers: int | None = DEFAULT_READ_WORKERS,
    meanwhile: Callable[[], object] | None = None,
) -> list[AnswerColumns]:
    """`read_answers` of every file, in order: with ``workers`` > 1 (None: `read_workers`; and
    several files, on a system that forks) one file per worker process, the workers forked from this
    one (so they share ``rubric_of``'s dataset without copying it, and the collector's state: a
    command that pauses it pauses them) and gone when this returns; else here, one after another.
    ``meanwhile`` is called here once, while the workers read (e.g. the caller's imports of what
    comes next), or before the files are read when none does. The first bad file (in order) raises
    its `DataError`."""
    count = read_workers(paths) if workers is None else workers
    if count <= 1 or len(paths) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        if meanwhile is not None:
            meanwhile()
        return [read_answers(p, rubric_of, allow_missing=allow_missing) for p in paths]
    pool = ProcessPoolExecutor(
        min(count, len(paths)),
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(rubric_of, allow_missing),
    )
    try:
        read = pool.map(_read_in_worker, [str(p) for p in paths])  # (every worker is forked by now)
        if meanwhile is not None:
            meanwhile()
        return list(read)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def read_workers(paths: Sequence[str | os.PathLike[str]]) -> int:
    """The reader processes `read_answers_of_files` uses by default (``healthbench.defaults``:
    `AUTO_READ_WORKERS` for at least two files of `AUTO_READ_MB` MB or more together, when the
    process may use that many cores and the 1-minute load average leaves `AUTO_READ_FREE_CORES` of
    them idle; else 1)."""
    if len(paths) < 2:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    idle = cores - os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if cores < AUTO_READ_WORKERS or idle < AUTO_READ_FREE_CORES:
        return 1
    size = sum(os.stat(p).st_size for p in paths) / 1e6
    return AUTO_READ_WORKERS if size >= AUTO_READ_MB else 1


_worker_setup: tuple[Callable[[str], Triples | None] | None, bool] = (None, False)  # (in a worker)


def _start_worker(rubric_of: Callable[[str], Triples | None] | None, allow_missing: bool) -> None:
    global _worker_setup
    _worker_setup = (rubric_of, allow_missing)


def _read_in_worker(path: str) -> AnswerColumns:
    rubric_of, allow_missing = _worker_setup
    return read_answers(path, rubric_of, allow_missing=allow_missing)
