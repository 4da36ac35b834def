"""Typed HealthBench records: what callers hold once a file is read.

`Conversation` is one line of the full / hard / consensus files (or a HealthBench Professional task);
`MetaEvalRecord` is one line of the meta-eval file. Files are read and validated by the one JSONL
reader (`healthbench.data.jsonl`; `healthbench.data.shapes` holds the field types and ranges and the
checks a schema cannot say); the records here are built from its decoded lines without validating twice
(`conversations_of`, `meta_records_of`). Loaded back from the store (which only holds records read
this way) they are type-checked by pydantic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from healthbench.data.roles import Role

if TYPE_CHECKING:  # (the records are built from lines; loading them needs no msgspec)
    from healthbench.data.shapes import ClassicLine, MetaLine, Turn


class Message(BaseModel):
    """One chat turn, as the official files and the OpenAI chat format write it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    role: Role
    content: StrictStr


class RubricItem(BaseModel):
    """One physician-written criterion. Points are kept as written (int stays int) so that the
    judge sees exactly what simple-evals shows it: ``[points] criterion``."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    criterion: StrictStr
    points: StrictInt | StrictFloat
    tags: list[StrictStr] = Field(default_factory=list)

    def __str__(self) -> str:
        return f"[{self.points}] {self.criterion}"


class Conversation(BaseModel):
    """One HealthBench example: the conversation so far and the rubric to grade the next reply."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    prompt: list[Message]
    prompt_id: StrictStr
    rubrics: list[RubricItem]
    example_tags: list[StrictStr] = Field(default_factory=list)
    ideal_completions_data: dict[str, Any] | None = None
    canary: StrictStr | None = None

    @property
    def themes(self) -> list[str]:
        from healthbench.data.shapes import themes_of  # (loading a record needs no msgspec)

        return themes_of(self.example_tags)


class MetaEvalRecord(BaseModel):
    """One meta-eval row: a fixed completion, one consensus criterion and the physicians' labels."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    prompt: list[Message]
    completion: StrictStr
    rubric: StrictStr
    category: StrictStr
    binary_labels: list[StrictBool]
    anonymized_physician_ids: list[StrictStr]
    prompt_id: StrictStr
    completion_id: StrictStr


def row_id(record: MetaEvalRecord) -> str:
    """A meta-eval row's stable id (its store item id): a completion can be labelled on several criteria."""
    return f"{record.completion_id}/{hashlib.sha256(record.rubric.encode()).hexdigest()[:16]}"


Record = TypeVar("Record", Conversation, MetaEvalRecord)


_set = object.__setattr__
# BaseModel's slots, set through their descriptors (no attribute lookup by name per record)
_SET_FIELDS_SET, _SET_EXTRA, _SET_PRIVATE = (
    BaseModel.__dict__[name].__set__
    for name in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
)
ModelT = TypeVar("ModelT", bound=BaseModel)


def _trusted(model: type[ModelT], fields: dict[str, Any]) -> ModelT:
    """A record of values the reader has validated, every field given: what `BaseModel.model_construct`
    does, without its per-field default and alias handling (a third of reading a dataset's time)."""
    record = model.__new__(model)
    _set(record, "__dict__", fields)
    _SET_FIELDS_SET(record, set(fields))
    _SET_EXTRA(record, None)
    _SET_PRIVATE(record, None)
    return record


def _messages(turns: Sequence[Turn]) -> list[Message]:
    return [_trusted(Message, {"role": t.role, "content": t.content}) for t in turns]


def conversations_of(lines: Sequence[ClassicLine]) -> list[Conversation]:
    """Records of lines the reader has validated (not validated again)."""
    return [
        _trusted(
            Conversation,
            {
                "prompt": _messages(line.prompt),
                "prompt_id": line.prompt_id,
                "rubrics": [
                    _trusted(RubricItem, {"criterion": r.criterion, "points": r.points, "tags": list(r.tags)})
                    for r in line.rubrics
                ],
                "example_tags": line.example_tags,
                "ideal_completions_data": line.ideal_completions_data,
                "canary": line.canary,
            },
        )
        for line in lines
    ]


def meta_records_of(lines: Sequence[MetaLine]) -> list[MetaEvalRecord]:
    """Records of meta-eval lines the reader has validated (not validated again)."""
    return [
        _trusted(
            MetaEvalRecord,
            {
                "prompt": _messages(line.prompt),
                "completion": line.completion,
                "rubric": line.rubric,
                "category": line.category,
                "binary_labels": line.binary_labels,
                "anonymized_physician_ids": line.anonymized_physician_ids,
                "prompt_id": line.prompt_id,
                "completion_id": line.completion_id,
            },
        )
        for line in lines
    ]
