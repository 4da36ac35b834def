"""The one reader of the HealthBench JSONL formats (classic eval, HealthBench Professional, meta-eval):
each line's shape is a msgspec struct, and the few rules a schema cannot say (a prompt ends with the
user turn, a rubric has a positive point, labels match their physicians, ids are unique) are written
once, here, as functions of a decoded line.

A source is a path, or the file's bytes with a ``name`` for messages (the service reads uploads
without writing them to disk). A valid file is decoded in one typed batch (`msgspec.json.Decoder.
decode_lines`); anything unusual sends the file to the line-by-line path, which decodes each line
with ``json`` (so decode errors read as Python's, with their column) and converts it to the same
struct: every failure is a `DataError` naming the file, the line and the field. Both paths return
the same structs; `healthbench.data.schema` builds the typed records callers use from them.

No pydantic is imported here: readers that only need the decoded lines (`rubric_index`, the
``_allresults.json`` reader) stay light.
"""

from __future__ import annotations

import codecs
import json
import math
import operator
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, TypeVar

import msgspec

from healthbench.errors import DataError
from healthbench.gc_paused import gc_paused

Source = str | os.PathLike[str] | bytes  # a path, or a file's bytes (named by ``name`` in errors)
Format = Literal["classic", "professional"]
CLASSIC: Format = "classic"
PROFESSIONAL: Format = "professional"
PROFESSIONAL_GROUP = "professional"  # the ideal_completions_group of a physician_response
TASK_TAGS = ("use_case", "type", "difficulty", "specialty")  # a Professional task's example tags
FORMAT_NAMES = {CLASSIC: "classic HealthBench", PROFESSIONAL: "HealthBench Professional"}

# --- shapes ---------------------------------------------------------------------------------------

Points = Annotated[int, msgspec.Meta(ge=-10, le=10)] | Annotated[float, msgspec.Meta(ge=-10, le=10)]
Role = Literal["system", "user", "assistant", "developer"]
NULL = msgspec.Raw(b"null")  # the default of an optional raw field
_QUOTE = ord('"')
_OBJECT_OR_NULL = (ord("{"), ord("n"))


class Message(msgspec.Struct, gc=False):
    """A chat message whose content is kept as raw JSON: checked to be a string (`is_text`), never
    decoded, where no score depends on it (``_allresults.json``)."""

    role: str
    content: msgspec.Raw


class Turn(msgspec.Struct, frozen=True, gc=False):
    """A chat message of a dataset line, decoded."""

    role: Role
    content: str


class RubricEntry(msgspec.Struct, frozen=True, gc=False):
    criterion: str
    points: Points
    tags: list[str] = msgspec.field(default_factory=list)


class ClassicLine(msgspec.Struct, frozen=True):
    """One line of the full / hard / consensus files (and what a Professional task reads as)."""

    prompt: list[Turn]
    prompt_id: str
    rubrics: list[RubricEntry]
    example_tags: list[str] = msgspec.field(default_factory=list)
    ideal_completions_data: dict[str, Any] | None = None
    canary: str | None = None


class MetaLine(msgspec.Struct, frozen=True, gc=False):
    """One meta-eval row: a fixed completion, one consensus criterion and the physicians' labels."""

    prompt: list[Turn]
    completion: str
    rubric: str
    category: str
    binary_labels: list[bool]
    anonymized_physician_ids: list[str]
    prompt_id: str
    completion_id: str


class _ProfessionalMessages(msgspec.Struct, frozen=True, gc=False):
    messages: list[Turn]


class _ProfessionalItem(msgspec.Struct, frozen=True, gc=False):
    criterion_text: str
    points: Points


class ProfessionalLine(msgspec.Struct, frozen=True):
    """One HealthBench Professional task as its file writes it."""

    id: str
    conversation: _ProfessionalMessages
    rubric_items: list[_ProfessionalItem]
    use_case: str
    type: str
    difficulty: str
    specialty: str
    physician_response: str | None = None

    def as_classic(self) -> ClassicLine:
        """The task as a classic line: task tags become example tags, the physician response the
        ideal completion (group ``professional``)."""
        return ClassicLine(
            prompt=self.conversation.messages,
            prompt_id=self.id,
            rubrics=[RubricEntry(i.criterion_text, i.points, []) for i in self.rubric_items],
            example_tags=[f"{name}:{getattr(self, name)}" for name in TASK_TAGS],
            ideal_completions_data={
                "ideal_completions_group": PROFESSIONAL_GROUP,
                "ideal_completion": self.physician_response,
                "ideal_completions_ref_completions": [],
            },
        )


Line = TypeVar("Line", ClassicLine, MetaLine, ProfessionalLine)
CRITERION, POINTS, TAGS = (operator.attrgetter(name) for name in ("criterion", "points", "tags"))


def is_text(raw: msgspec.Raw) -> bool:
    """Whether raw JSON is a string."""
    return memoryview(raw)[0] == _QUOTE


def is_object_or_null(raw: msgspec.Raw) -> bool:
    """Whether raw JSON is an object or null."""
    return memoryview(raw)[0] in _OBJECT_OR_NULL


# --- the rules a schema cannot say: (field, message) of the first problem, or None ----------------

Problem = tuple[str, str]


class _Turn(Protocol):
    @property
    def role(self) -> str: ...


def prompt_problem(turns: Sequence[_Turn]) -> Problem | None:
    """An empty prompt, or one that does not end with the user turn the model answers."""
    if not turns:
        return "", "the conversation has no messages"
    if turns[-1].role != "user":
        return "", (
            f"the last turn is {turns[-1].role!r}; a conversation must end with the user turn "
            "the model answers"
        )
    return None


def has_positive_points(points: Iterable[float]) -> bool:
    """Whether a rubric can be scored: a conversation's score divides by its positive points."""
    return any(p > 0 for p in points)


def rubric_problem(criteria: Sequence[str], points: Sequence[float]) -> Problem | None:
    """An empty criterion (field: its index), an empty rubric or one without positive points."""
    for index, criterion in enumerate(criteria):
        if not criterion.strip():
            return f"{index}", "the criterion is empty"
    if not points:
        return "", "the rubric is empty"
    if not has_positive_points(points):
        return "", "the rubric has no criterion with positive points, so no score can be computed"
    return None


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def line_problem(line: ClassicLine | MetaLine | ProfessionalLine) -> Problem | None:
    """The first rule a decoded line breaks, with the field as the file names it."""
    if isinstance(line, ProfessionalLine):
        found = prompt_problem(line.conversation.messages)
        if found is not None:
            return _join("conversation.messages", found[0]), found[1]
        criteria = [i.criterion_text for i in line.rubric_items]
        found = rubric_problem(criteria, [i.points for i in line.rubric_items])
        if found is not None:
            where = f"{found[0]}.criterion_text" if found[0] else ""
            return _join("rubric_items", where), found[1]
        return None
    found = prompt_problem(line.prompt)
    if found is not None:
        return _join("prompt", found[0]), found[1]
    if isinstance(line, ClassicLine):
        found = rubric_problem(list(map(CRITERION, line.rubrics)), list(map(POINTS, line.rubrics)))
        if found is not None:
            where = f"{found[0]}.criterion" if found[0] else ""
            return _join("rubrics", where), found[1]
        return None
    if not line.binary_labels:
        return "binary_labels", "binary_labels is empty"
    if len(line.binary_labels) != len(line.anonymized_physician_ids):
        return "anonymized_physician_ids", (
            f"binary_labels has {len(line.binary_labels)} labels but anonymized_physician_ids has "
            f"{len(line.anonymized_physician_ids)} ids"
        )
    return None


def identity(line: ClassicLine | MetaLine | ProfessionalLine) -> tuple[str, str]:
    """(the field named by a duplicate's error, the key that must be unique in a file)."""
    if isinstance(line, ProfessionalLine):
        return "id", line.id
    if isinstance(line, MetaLine):
        return "prompt_id", f"{line.completion_id} / {line.rubric}"
    return "prompt_id", line.prompt_id


# --- bytes and JSON: the one place decode failures are mapped --------------------------------------


def load_json(text: str, *, source: str, line: int | None = None) -> Any:
    """The JSON value of ``text``: a whole file (``line`` None) or one line of a JSONL file. Every way
    the text can fail to decode (bad syntax, an integer of more than 4,300 digits, nesting too deep) is
    a `DataError` naming the file, the line and the column."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
        raise DataError(
            f"invalid JSON ({reason})", path=source, line=line if line is not None else exc.lineno
        ) from None
    except RecursionError:
        raise DataError(
            "invalid JSON (arrays or objects nested too deeply to read)",
            path=source,
            line=line,
        ) from None
    except ValueError:  # int("1" * 5000) is past Python's limit on the digits of an integer
        limit = sys.get_int_max_str_digits()
        raise DataError(
            f"invalid JSON (a number of more than {limit} digits)", path=source, line=line
        ) from None


def decode_text(data: bytes, *, source: str) -> str:
    """Raw bytes of a JSON or JSONL file as text: a UTF-8 BOM (Windows editors) is dropped; bytes that
    are not UTF-8 are a `DataError` naming the line and the byte within it."""
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"not valid UTF-8 (byte {exc.start - line_start + 1})", path=source, line=line
        ) from None


def decode_lines(data: bytes, *, source: str) -> list[str]:
    """Split raw bytes into text lines (`decode_text`: a BOM is dropped, bad bytes name their line)."""
    return decode_text(data, source=source).split("\n")


def utf8_bytes(data: bytes) -> bytes:
    """``data`` without a UTF-8 BOM, checked to be UTF-8 (msgspec passes bad bytes inside strings it
    keeps raw): a `UnicodeDecodeError` otherwise."""
    data = data.removeprefix(codecs.BOM_UTF8)
    data.decode("utf-8")
    return data


def source_bytes(source: Source, name: str | None = None) -> tuple[bytes, str]:
    """The bytes of a source and the name errors give it (a path as written; data: ``name`` or
    ``<bytes>``)."""
    if isinstance(source, bytes):
        return source, name or "<bytes>"
    label = name or str(source)
    try:
        return Path(source).read_bytes(), label
    except OSError as exc:
        raise DataError(exc.strerror or "cannot read file", path=label) from None


# --- formats --------------------------------------------------------------------------------------


def format_of_row(raw: Any) -> Format | None:
    """Which schema a parsed JSON line follows, by its distinctive keys (None: neither)."""
    if not isinstance(raw, dict):
        return None
    if "rubric_items" in raw and "conversation" in raw:
        return PROFESSIONAL
    if "rubrics" in raw and "prompt" in raw:
        return CLASSIC
    return None


def detect_format(lines: Iterable[str | bytes]) -> Format:
    """The format of the first line that names one (classic when none does: its errors are clearer)."""
    for line in lines:
        if line.strip():
            try:
                found = format_of_row(json.loads(line))
            except (ValueError, RecursionError):
                return CLASSIC
            if found is not None:
                return found
    return CLASSIC


def file_format(source: Source) -> Format:
    """The format of an eval file from its first line that names one (classic when unreadable)."""
    if isinstance(source, bytes):
        return detect_format(_lines_of(source.removeprefix(codecs.BOM_UTF8)))
    try:
        with Path(source).open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.strip():
                    return detect_format([line.removeprefix("\ufeff")])
    except OSError:
        pass
    return CLASSIC


def _lines_of(data: bytes) -> Iterator[bytes]:
    """The lines of ``data`` one by one (the first few are all format detection reads)."""
    start = 0
    while start <= len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        yield data[start:end]
        start = end + 1


# --- the reader -----------------------------------------------------------------------------------

_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_FORMAT_OF_SHAPE: dict[type[Any], Format] = {ClassicLine: CLASSIC, ProfessionalLine: PROFESSIONAL}


def read_lines(source: Source, shape: type[Line], *, name: str | None = None) -> list[Line]:
    """Every line of a JSONL file as ``shape`` (blank lines skipped), each checked by `line_problem`
    and unique by `identity`; any failure is a `DataError` naming the file, the line and the field."""
    data, label = source_bytes(source, name)
    with gc_paused():  # a file decodes into ~10^5 acyclic objects
        fast = _decode_valid(data, shape)
    return fast if fast is not None else _read_line_by_line(data, shape, label)


def read_eval(source: Source, *, name: str | None = None) -> tuple[Format, list[ClassicLine]]:
    """An eval file of either format (detected from its first row) as classic lines."""
    data, label = source_bytes(source, name)
    if file_format(data) == PROFESSIONAL:
        return PROFESSIONAL, [t.as_classic() for t in read_lines(data, ProfessionalLine, name=label)]
    return CLASSIC, read_lines(data, ClassicLine, name=label)


def _decode_valid(data: bytes, shape: type[Line]) -> list[Line] | None:
    """The lines of a valid file in one typed batch; None when anything is unusual (the line-by-line
    path then names it)."""
    decoder = _DECODERS.get(shape)
    if decoder is None:
        decoder = _DECODERS[shape] = msgspec.json.Decoder(shape)
    try:
        data = utf8_bytes(data)
        lines: list[Line] = decoder.decode_lines(data)
    except (ValueError, RecursionError):  # (msgspec's DecodeError and ValidationError, bad UTF-8)
        return None
    if not lines or len(lines) != sum(1 for text in data.split(b"\n") if text.strip()):
        return None  # (two objects on one line, or a line only Python calls blank)
    if any(map(line_problem, lines)):
        return None
    keys = [identity(line)[1] for line in lines]
    return lines if len(set(keys)) == len(keys) else None


def _read_line_by_line(data: bytes, shape: type[Line], source: str) -> list[Line]:
    lines: list[Line] = []
    seen: dict[str, int] = {}
    for number, text in enumerate(decode_lines(data, source=source), start=1):
        if not text.strip():
            continue
        line = parse_line(text, shape, source=source, number=number)
        field, key = identity(line)
        if key in seen:
            raise DataError(
                f"duplicate {key!r} (first seen on line {seen[key]})", path=source, line=number, field=field
            )
        seen[key] = number
        lines.append(line)
    if not lines:
        raise DataError("the file contains no records", path=source)
    return lines


def parse_line(text: str, shape: type[Line], *, source: str, number: int) -> Line:
    """One JSONL line as ``shape``, checked by `line_problem`; a `DataError` naming file, line, field."""
    raw = load_json(text, source=source, line=number)
    if not isinstance(raw, dict):
        raise DataError(f"expected a JSON object, got {_python_type(raw)}", path=source, line=number)
    expected = _FORMAT_OF_SHAPE.get(shape)
    found = format_of_row(raw)
    if expected is not None and found is not None and found != expected:
        raise DataError(
            f"a {FORMAT_NAMES[found]} row in a {FORMAT_NAMES[expected]} file; one file holds one format "
            "(see --format)",
            path=source,
            line=number,
        )
    try:
        line = msgspec.convert(raw, shape)
    except msgspec.ValidationError as exc:
        field, message = _schema_problem(str(exc), raw)
        raise DataError(message, path=source, line=number, field=field or None) from None
    problem = line_problem(line)
    if problem is not None:
        raise DataError(problem[1], path=source, line=number, field=problem[0] or None)
    return line


# --- msgspec's validation messages, as the files' readers have always worded them ----------------

_TYPE_WORDS = {
    "str": "Input should be a valid string",
    "bool": "Input should be a valid boolean",
    "array": "Input should be a valid list",
    "object": "Input should be a valid dictionary",
    "object | null": "Input should be a valid dictionary or null",
    "str | null": "Input should be a valid string or null",
}


def _schema_problem(message: str, raw: Any) -> Problem:
    """(dotted field, message) of a msgspec validation message on ``raw`` (the decoded line)."""
    what, _, at = message.partition(" - at `$")
    path = at.rstrip("`")
    parts = [p for p in path.replace("[", ".").replace("]", "").split(".") if p]
    if what.startswith("Object missing required field `"):
        return _join(*parts, what.split("`")[1]), "Field required"
    value: Any = raw
    for part in parts:
        value = value[int(part)] if isinstance(value, list) else value.get(part)
    field = ".".join(parts)
    if isinstance(value, float) and math.isnan(value):
        return field, "points is NaN, not a number"
    if what.startswith("Invalid enum value"):
        return field, "Input should be 'system', 'user', 'assistant' or 'developer'"
    if what.startswith("Expected `int | float`"):
        if "got" in what:
            return field, f"expected int or float, got {_python_type(value)}"
        bound = "less than or equal to 10" if value > 10 else "greater than or equal to -10"
        return field, f"Input should be {bound}"
    for expected, words in _TYPE_WORDS.items():
        if what.startswith(f"Expected `{expected}`"):
            return field, words
    return field, what[:1].lower() + what[1:]


def _python_type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


Keyed = TypeVar("Keyed")  # a line or a record: anything with a prompt_id and rubrics
_PROMPT_ID, _RUBRICS = operator.attrgetter("prompt_id"), operator.attrgetter("rubrics")


def join_by_prompt_id(loaded: Sequence[tuple[str, Sequence[Keyed]]]) -> dict[str, Keyed]:
    """The conversations of several files (each named) by prompt_id; a prompt_id in several files
    must have the same rubric in each, or it is a `DataError` naming the later file."""
    joined: dict[str, Keyed] = {}
    origin: dict[str, str] = {}
    for name, lines in loaded:
        for line in lines:
            prompt_id = _PROMPT_ID(line)
            known = joined.get(prompt_id)
            if known is not None and _RUBRICS(known) != _RUBRICS(line):
                raise DataError(
                    f"prompt_id {prompt_id} has a different rubric in {origin[prompt_id]}"
                    "; give only the dataset the run used",
                    path=name,
                )
            joined.setdefault(prompt_id, line)
            origin.setdefault(prompt_id, name)
    return joined
