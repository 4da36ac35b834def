"""The shapes of the HealthBench JSONL lines (classic eval, HealthBench Professional, meta-eval) as
msgspec structs, and the few rules a schema cannot say (a prompt ends with the user turn, a rubric
has a positive point, labels match their physicians), written once as functions of a decoded line.
Pure: no I/O. The reader is `healthbench.data.jsonl`; the ``_allresults.json`` reader uses the same
shapes and rules for what the two files share (messages, points, a conversation's rules).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Protocol, TypeVar

import msgspec

from healthbench.data.formats import PROFESSIONAL_GROUP, TASK_TAGS
from healthbench.data.roles import Role

Points = Annotated[int, msgspec.Meta(ge=-10, le=10)] | Annotated[float, msgspec.Meta(ge=-10, le=10)]
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
    """A criterion; its tags a tuple, immutable like the entry (the collector does not track a tuple
    of strings either: a dataset holds ~57,000 of them)."""

    criterion: str
    points: Points
    tags: tuple[str, ...] = ()


class ClassicLine(msgspec.Struct, frozen=True, gc=False):
    """One line of the full / hard / consensus files (and what a Professional task reads as): also
    the conversation every result read from a file or the store holds (`healthbench.scoring.rubric.
    Scored`; no pydantic record is built for it, and the collector does not track it)."""

    prompt: list[Turn]
    prompt_id: str
    rubrics: list[RubricEntry]
    example_tags: list[str] = msgspec.field(default_factory=list)
    ideal_completions_data: dict[str, Any] | None = None
    canary: str | None = None

    @property
    def themes(self) -> list[str]:
        return themes_of(self.example_tags)


def stored_conversation(record: Any) -> ClassicLine:
    """A conversation as the store holds it (the JSON of a line the reader validated) decoded again."""
    return msgspec.convert(record, ClassicLine)


def themes_of(example_tags: Iterable[str]) -> list[str]:
    """The themes of a conversation's example tags (``theme:emergency_referrals`` -> its name)."""
    return [tag.removeprefix("theme:") for tag in example_tags if tag.startswith("theme:")]


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


class ProfessionalLine(msgspec.Struct, frozen=True, gc=False):
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
            rubrics=[RubricEntry(i.criterion_text, i.points) for i in self.rubric_items],
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
