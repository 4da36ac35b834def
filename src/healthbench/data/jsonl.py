"""The one reader of the HealthBench JSONL formats (classic eval, HealthBench Professional, meta-eval):
each line is read as its shape in `healthbench.data.shapes` and checked by the rules written there
(`line_problem`); ids must be unique in a file (`identity`).

A source is a path, or the file's bytes with a ``name`` for messages (the service reads uploads
without writing them to disk). A file is read a page at a time (`read_pages`: whole lines of about
`PAGE_BYTES`; a path is never read whole), each page decoded in one typed batch (`msgspec.json.
Decoder.decode_lines`); anything unusual sends the file to the line-by-line path, which decodes each
line and converts it to the same struct, so that every failure is a `DataError` naming the file, the
line and the field, the one the whole file gives. Both paths return the same structs; `read_lines`
gathers the pages, and `healthbench.data.schema` builds the typed records callers use from them.
msgspec's errors are worded in one place (`decode_json`, `schema_problem`), for this reader and the
``_allresults.json`` one.

No pydantic is imported here: readers that only need the decoded lines stay light.
"""

from __future__ import annotations

import codecs
import itertools
import operator
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from healthbench.data.formats import CLASSIC, FORMAT_NAMES, PROFESSIONAL, Format, file_format, format_of_row
from healthbench.data.formats import Source as Source
from healthbench.data.shapes import (
    ClassicLine,
    Line,
    Problem,
    ProfessionalLine,
    identity,
    line_problem,
)
from healthbench.errors import DataError

T = TypeVar("T")
_ANY: msgspec.json.Decoder[Any] = msgspec.json.Decoder()

# --- bytes and JSON: the one place decode failures are mapped --------------------------------------


def load_json(text: str | bytes, *, source: str, line: int | None = None) -> Any:
    """The JSON value of ``text``: a whole file (``line`` None) or one line of a JSONL file. Invalid
    JSON is a `DataError` naming the file, the line and the column (`decode_json`)."""
    return decode_json(text, _ANY, source=source, line=line)


def decode_json(
    text: str | bytes, decoder: msgspec.json.Decoder[T], *, source: str, line: int | None = None
) -> T:
    """``text`` decoded by ``decoder``: the one place msgspec's failures are worded. Invalid JSON names
    its line and column; a value the schema refuses names its field (`schema_problem`)."""
    try:
        return decoder.decode(text)
    except msgspec.ValidationError as exc:
        field, reason = schema_problem(str(exc))
        field = "" if "[...]" in field else field  # (msgspec's placeholder where it lost the position)
        raise DataError(reason, path=source, line=line, field=field or None) from None
    except msgspec.DecodeError as exc:
        raise _syntax_error(str(exc), text, source, line) from None
    except RecursionError:
        raise DataError(
            "invalid JSON (arrays or objects nested too deeply to read)", path=source, line=line
        ) from None


def _syntax_error(message: str, text: str | bytes, source: str, line: int | None) -> DataError:
    """msgspec's ``JSON is malformed: ... (byte N)`` as ours: what, at which line and column."""
    what, _, at = message.removeprefix("JSON is malformed: ").partition(" (byte ")
    data = text.encode() if isinstance(text, str) else text
    byte = int(at.rstrip(")")) if at.rstrip(")").isdigit() else len(data)
    start = data.rfind(b"\n", 0, byte) + 1
    number = (line or 1) + data.count(b"\n", 0, byte)
    what = what[:1].lower() + what[1:]
    return DataError(f"invalid JSON ({what} at column {byte - start + 1})", path=source, line=number)


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
    if not data.isascii():  # (ASCII is UTF-8: checked without decoding a copy)
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


# --- the reader -----------------------------------------------------------------------------------

_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_FORMAT_OF_SHAPE: dict[type[Any], Format] = {ClassicLine: CLASSIC, ProfessionalLine: PROFESSIONAL}
PAGE_BYTES = 1 << 18  # a page: whole lines of about this many bytes (one longer line is a page of its own)
_FALLBACK_PAGE = 256  # lines per page on the line-by-line path


def read_pages(source: Source, shape: type[Line], *, name: str | None = None) -> Iterator[list[Line]]:
    """The lines of a JSONL file as ``shape``, a page (`PAGE_BYTES` of whole lines) at a time, in file
    order (blank lines skipped): each checked by `line_problem` and unique by `identity` in the whole
    file. A path is read a page at a time, never whole. Every failure is the `DataError` the
    line-by-line path names (file, line, field): the first page the batch decode refuses sends the
    whole file there (the pages already given are not given again), so the error is the one the
    file would give read whole (bad UTF-8 anywhere first, then the first bad line)."""
    label = name or ("<bytes>" if isinstance(source, bytes) else str(source))
    seen: set[int] = set()
    given = 0
    for number, page in enumerate(_byte_pages(source, label)):
        if number and page.startswith(codecs.BOM_UTF8):
            break  # a BOM inside the file: the line-by-line path names it
        lines = _decode_valid(page, shape, seen)
        if lines is None:
            break
        given += len(lines)
        if lines:
            yield lines
    else:
        if given:
            return
    rest = itertools.islice(_lines_one_by_one(source_bytes(source, label)[0], shape, label), given, None)
    while chunk := list(itertools.islice(rest, _FALLBACK_PAGE)):
        yield chunk


def read_lines(source: Source, shape: type[Line], *, name: str | None = None) -> list[Line]:
    """Every line of a JSONL file as ``shape`` (`read_pages`, gathered)."""
    return [line for page in read_pages(source, shape, name=name) for line in page]


def read_eval_pages(source: Source, *, name: str | None = None) -> tuple[Format, Iterator[list[ClassicLine]]]:
    """An eval file of either format (detected from its first row) as pages of classic lines."""
    if file_format(source) == PROFESSIONAL:
        pages = read_pages(source, ProfessionalLine, name=name)
        return PROFESSIONAL, ([task.as_classic() for task in page] for page in pages)
    return CLASSIC, read_pages(source, ClassicLine, name=name)


def read_eval(source: Source, *, name: str | None = None) -> tuple[Format, list[ClassicLine]]:
    """An eval file of either format (detected from its first row) as classic lines."""
    found, pages = read_eval_pages(source, name=name)
    return found, [line for page in pages for line in page]


def _byte_pages(source: Source, label: str) -> Iterator[bytes]:
    """The bytes of a source in pages of whole lines (the last may lack its newline)."""
    if isinstance(source, bytes):
        blocks: Iterable[bytes] = (source[i : i + PAGE_BYTES] for i in range(0, len(source), PAGE_BYTES))
        yield from _whole_lines(blocks)
        return
    try:
        with Path(source).open("rb") as handle:
            yield from _whole_lines(iter(lambda: handle.read(PAGE_BYTES), b""))
    except OSError as exc:
        raise DataError(exc.strerror or "cannot read file", path=label) from None


def _whole_lines(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """Blocks of bytes regrouped to end at a newline."""
    parts: list[bytes] = []
    for block in blocks:
        cut = block.rfind(b"\n") + 1
        if not cut:
            parts.append(block)
            continue
        yield b"".join([*parts, block[:cut]])
        parts = [block[cut:]] if cut < len(block) else []
    if parts:
        yield b"".join(parts)


def _decode_valid(data: bytes, shape: type[Line], seen: set[int]) -> list[Line] | None:
    """The lines of a valid page of a file in one typed batch; None when anything is unusual (the
    line-by-line path then names it). ``seen``: the hashes of the keys of the pages before (updated;
    a meta-eval key holds its criterion's text, a hash does not: two keys of one hash only send the
    file to the line-by-line path, which compares the keys themselves)."""
    decoder = _DECODERS.get(shape)
    if decoder is None:
        decoder = _DECODERS[shape] = msgspec.json.Decoder(shape)
    try:
        data = utf8_bytes(data)
        lines: list[Line] = decoder.decode_lines(data)
    except (ValueError, RecursionError):  # (msgspec's DecodeError and ValidationError, bad UTF-8)
        return None
    if len(lines) != sum(1 for text in data.split(b"\n") if text.strip()):
        return None  # (two objects on one line, or a line only Python calls blank)
    if any(map(line_problem, lines)):
        return None
    keys = {hash(identity(line)[1]) for line in lines}
    if len(keys) != len(lines) or not keys.isdisjoint(seen):
        return None
    seen |= keys
    return lines


def _lines_one_by_one(data: bytes, shape: type[Line], source: str) -> Iterator[Line]:
    """The lines of a whole file decoded one at a time (`parse_line`), in order; the first problem is
    a `DataError` naming file, line and field."""
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
        yield line
    if not seen:
        raise DataError("the file contains no records", path=source)


def parse_line(text: str, shape: type[Line], *, source: str, number: int) -> Line:
    """One JSONL line as ``shape``, checked by `line_problem`; a `DataError` naming file, line, field."""
    raw = load_json(text, source=source, line=number)
    if not isinstance(raw, dict):
        _, reason = schema_problem(f"Expected `object`, got `{_json_type(raw)}`")
        raise DataError(reason, path=source, line=number)
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
        field, message = schema_problem(str(exc))
        dotted = field.replace("[", ".").replace("]", "")  # (a JSONL field as `line_problem` names it)
        raise DataError(message, path=source, line=number, field=dotted or None) from None
    problem = line_problem(line)
    if problem is not None:
        raise DataError(problem[1], path=source, line=number, field=problem[0] or None)
    return line


def _json_type(value: Any) -> str:
    """The JSON type of a decoded value, as msgspec names it."""
    names = {str: "str", bool: "bool", int: "int", float: "float", list: "array", dict: "object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# --- msgspec's validation messages, in one wording for every file -----------------------------------

_MESSAGE = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<at>.*)`)?$", re.DOTALL)
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`$")
_EXPECTED = re.compile(r"^Expected `(?P<expected>[^`]+)`(?P<bound>[^,]*)(?:, got `(?P<got>[^`]+)`)?$")
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
    "str | null": "a string or null",
    "object | null": "an object or null",
}


def schema_problem(message: str) -> Problem:
    """(field, reason) of a msgspec validation message: what was expected and what was found
    (``expected a number, got a string``), a missing field, or a bound (``expected a number <= 10``);
    the field as msgspec names it (``metadata.example_level_metadata[3].points``), "" for the root."""
    match = _MESSAGE.match(message)
    what, at = (match["what"], (match["at"] or "").lstrip(".")) if match else (message, "")
    missing = _MISSING.match(what)
    if missing:
        return ".".join(filter(None, (at, missing["name"]))), "missing field"
    expected = _EXPECTED.match(what)
    if expected is None:
        return at, what[:1].lower() + what[1:]
    wanted = _TYPE_NAMES.get(expected["expected"], expected["expected"])
    if not at and expected["expected"] == "object":
        wanted = "a JSON object"
    bound = expected["bound"].strip().replace(".0", "")
    got = f", got {_TYPE_NAMES.get(expected['got'], expected['got'])}" if expected["got"] else ""
    return at, f"expected {wanted}{' ' + bound if bound else ''}{got}"


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
