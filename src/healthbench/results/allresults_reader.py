"""The one reader of simple-evals' ``_allresults.json``: one msgspec schema decodes and validates the
whole file in one batch, then one pass over its examples checks the few rules a schema cannot say (one
completion message, texts are strings, answers to one prompt_id share a rubric, a rubric joined with
the dataset is the dataset's, an example without a dataset entry is a valid conversation). Every
failure is a `DataError` naming the file, the example and the field
(``metadata.example_level_metadata[3].rubric_items[1].points``), worded as the JSONL reader words
them (`healthbench.data.jsonl.decode_json`).

`healthbench.results.simple_evals.load_allresults` builds the graded samples from what this reads. A
source is a path, or the file's bytes or text with a ``name`` for messages (the service reads uploads
without writing them to disk). With ``texts=False`` the same reader decodes a second schema of the
file, what scores read (`Answer`: prompt_id, prompt, rubric and verdicts): completions, usage and
explanations are skipped, not decoded nor checked (`healthbench analyze` and a plain `import` need
none of them).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, get_args

import msgspec

from healthbench.data.jsonl import Source, decode_json, decode_text, source_bytes, utf8_bytes
from healthbench.data.roles import Role
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
from healthbench.errors import DataError

EXAMPLES = "metadata.example_level_metadata"
ROLES = frozenset(get_args(Role))


class Verdicted(msgspec.Struct, gc=False):
    """A graded criterion as scores read it (``texts=False``)."""

    criterion: str
    points: Points
    tags: tuple[str, ...]  # (as `healthbench.data.shapes.RubricEntry`'s)
    criteria_met: bool | None


class Item(Verdicted, gc=False):
    """A graded criterion."""

    explanation: msgspec.Raw = NULL  # any JSON (graders sometimes return structured explanations)


class Answer(msgspec.Struct, gc=False):
    """A graded answer as scores read it (``texts=False``): no completion, usage nor explanations."""

    prompt_id: str
    rubric_items: tuple[Verdicted, ...]  # (tuples of untracked structs: the collector untracks them)
    prompt: tuple[Message, ...]


class Example(msgspec.Struct, gc=False):
    """A graded answer."""

    prompt_id: str
    rubric_items: tuple[Item, ...]
    prompt: tuple[Message, ...]
    completion: tuple[Message, ...]
    usage: msgspec.Raw = NULL  # an object or null (checked, not decoded)


ExampleT = TypeVar("ExampleT", Example, Answer)


class _Metadata(msgspec.Struct, Generic[ExampleT], gc=False):
    example_level_metadata: list[ExampleT]


class _File(msgspec.Struct, Generic[ExampleT], gc=False):
    """The file: its examples as `Example` or, as scores read it (``texts=False``), as `Answer`."""

    metadata: _Metadata[ExampleT]
    score: float | None = None
    metrics: dict[str, Any] = msgspec.field(default_factory=dict)


_DECODER = msgspec.json.Decoder(_File[Example])
_ANSWERS_DECODER = msgspec.json.Decoder(_File[Answer])  # (``texts=False``)


class _Criterion(Protocol):
    @property
    def criterion(self) -> str: ...
    @property
    def points(self) -> float: ...
    @property
    def tags(self) -> Sequence[str]: ...


class Rubrics(Protocol):
    """What the reader needs of a dataset: each conversation's rubric, by prompt_id."""

    def get(self, prompt_id: str, /) -> Sequence[_Criterion] | None: ...


_WHOLE = operator.attrgetter("criterion", "points", "tags")


def same_rubric(a: Sequence[_Criterion], b: Sequence[_Criterion]) -> bool:
    """Whether two rubrics have the same criteria, points and tags, in the same order (tags as a
    tuple or a list alike: the reader's are tuples, a record's lists)."""
    if len(a) == len(b) and list(map(_WHOLE, a)) == list(map(_WHOLE, b)):
        return True  # (the usual case, in one comparison)
    if len(a) != len(b) or any(list(map(get, a)) != list(map(get, b)) for get in (CRITERION, POINTS)):
        return False
    tags_a, tags_b = list(map(TAGS, a)), list(map(TAGS, b))
    return tags_a == tags_b or list(map(tuple, tags_a)) == list(map(tuple, tags_b))


class DatasetRubrics:
    """A dataset's rubrics by prompt_id (`Rubrics`), each kept beside its criteria as `same_rubric`
    first compares them: made once, it serves every file read against the dataset."""

    def __init__(self, rubrics: Rubrics) -> None:
        self._rubrics = rubrics
        self._wholes: dict[str, list[Any]] = {}

    def get(self, prompt_id: str, /) -> Sequence[_Criterion] | None:
        return self._rubrics.get(prompt_id)

    def same(self, rubric: Sequence[_Criterion], prompt_id: str, expected: Sequence[_Criterion]) -> bool:
        """`same_rubric` of ``rubric`` and ``expected``, the dataset's rubric of ``prompt_id``."""
        whole = self._wholes.get(prompt_id)
        if whole is None:
            whole = self._wholes[prompt_id] = list(map(_WHOLE, expected))
        return list(map(_WHOLE, rubric)) == whole or same_rubric(rubric, expected)


@dataclass(frozen=True)
class Decoded:
    """A valid file: its examples (in file order; `Answer`s when read without texts) and the numbers it
    reports."""

    source: str
    examples: Sequence[Example | Answer]
    score: float | None
    metrics: dict[str, Any]


def decode_allresults(
    source: Source,
    rubrics: DatasetRubrics | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
    texts: bool = True,
) -> Decoded:
    """Read and check a file (module doc). With ``rubrics`` (the dataset's rubrics, made once for
    many files) each example's rubric must be the dataset's, and a prompt_id absent from the
    dataset is an error unless ``allow_missing``. ``name`` names ``source`` in errors (default: the
    path; ``<bytes>`` for data). Without ``texts``, `Answer`s: no completion, usage nor explanation
    is decoded or checked."""
    data, label = source_bytes(source, name)
    try:  # (msgspec passes bad bytes inside the texts it keeps raw)
        data = utf8_bytes(data)
    except UnicodeDecodeError:
        decode_text(data, source=label)  # (raises, naming the line and the byte)
        raise
    try:
        document: _File[Example] | _File[Answer] = (
            decode_json(data, _DECODER, source=label)
            if texts
            else decode_json(data, _ANSWERS_DECODER, source=label)
        )
    except DataError as exc:
        if exc.field in ("metadata", f"{EXAMPLES}") and exc.reason.startswith(("missing", "expected an")):
            raise DataError(
                f"not a HealthBench result file: it has no {EXAMPLES} (simple-evals writes it only for "
                "HealthBench; is this another benchmark's _allresults.json?)",
                path=label,
            ) from None
        raise
    examples: Sequence[Example | Answer] = document.metadata.example_level_metadata
    if not examples:
        raise DataError(f"the file holds no graded example ({EXAMPLES} is empty)", path=label)
    missing: list[str] = []
    first_of: dict[str, int] = {}  # prompt_id -> its first example
    for index, example in enumerate(examples):
        _check_example(example, label, f"{EXAMPLES}[{index}]")
        rubric = example.rubric_items
        first = first_of.setdefault(example.prompt_id, index)
        if first != index and not same_rubric(examples[first].rubric_items, rubric):
            raise DataError(
                f"prompt_id {example.prompt_id!r} is also example {first} with another rubric: answers "
                "to one prompt_id are pooled as repeats, so their rubrics must be the same",
                path=label,
                field=f"{EXAMPLES}[{index}].rubric_items",
            )
        expected = rubrics.get(example.prompt_id) if rubrics is not None else None
        if rubrics is None or expected is None:
            if rubrics is not None:
                missing.append(example.prompt_id)
            check_conversation(example, label, f"{EXAMPLES}[{index}]")
        elif not rubrics.same(rubric, example.prompt_id, expected):
            raise DataError(
                f"the rubric stored for prompt_id {example.prompt_id} differs from the dataset's "
                f"({len(rubric)} vs {len(expected)} criteria); join the dataset the run used",
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
    return Decoded(label, examples, document.score, document.metrics)


def raw_kind(raw: msgspec.Raw) -> str:
    """The JSON type of raw JSON, as errors name it."""
    first = bytes(memoryview(raw)[:1])
    return {b'"': "a string", b"{": "an object", b"[": "a list", b"n": "null", b"t": "a boolean"}.get(
        first, "a boolean" if first == b"f" else "a number"
    )


def _check_example(example: Example | Answer, source: str, where: str) -> None:
    """What the schema cannot say about any example: texts are strings, a prompt, one completion
    message, usage an object or null, no empty criterion (an `Answer`: the prompt and criteria)."""
    _check_texts(example.prompt, source, f"{where}.prompt")
    if not example.prompt:
        raise DataError("the prompt has no messages", path=source, field=f"{where}.prompt")
    if isinstance(example, Example):
        _check_texts(example.completion, source, f"{where}.completion")
        if len(example.completion) != 1:
            raise DataError(
                f"expected exactly one completion message, got {len(example.completion)}",
                path=source,
                field=f"{where}.completion",
            )
        if not is_object_or_null(example.usage):
            raise DataError(
                f"expected an object or null, got {raw_kind(example.usage)}",
                path=source,
                field=f"{where}.usage",
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


def check_conversation(example: Example | Answer, source: str, where: str) -> None:
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


def texts(raws: Sequence[msgspec.Raw]) -> list[str]:
    """Raw JSON strings (checked by `is_text`) decoded, in one call."""
    return msgspec.json.decode(b"[" + b",".join(raws) + b"]", type=list[str])
