"""HealthBench Professional (2026): its schema, read into the same `Conversation` records.

A Professional task is ``{"id", "conversation": {"messages": [...]}, "rubric_items": [{"criterion_text",
"points"}], "use_case", "type", "difficulty", "specialty", "physician_response"}``: no per-criterion tags,
and per-task tags that become example tags (``use_case:consult``, ``type:red_teaming``,
``difficulty:difficult``, ``specialty:cardiology``), so the same core scores them as example-level
keys. The physician response becomes the row's ideal completion (group ``professional``), gradeable
as a baseline like the classic physician completions.

Upstream's Professional mode grades with a GPT-5.4 grader at low reasoning effort and reports
``overall_score_length_adjusted`` with center 2,000 characters and 0.0147 per 500 characters; those
are the defaults here (`professional_defaults`), each overridable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from healthbench.data.formats import CLASSIC as CLASSIC
from healthbench.data.formats import FORMAT_NAMES, Source
from healthbench.data.formats import PROFESSIONAL as PROFESSIONAL
from healthbench.data.formats import PROFESSIONAL_GROUP as PROFESSIONAL_GROUP
from healthbench.data.formats import TASK_TAGS as TASK_TAGS
from healthbench.data.formats import Format as Format
from healthbench.data.formats import file_format as file_format
from healthbench.data.schema import Conversation, conversations_of
from healthbench.errors import DataError

PROFESSIONAL_JUDGE = "openai/gpt-5.4"
PROFESSIONAL_REASONING_EFFORT = "low"
PROFESSIONAL_LENGTH_CENTER = 2000.0
PROFESSIONAL_LENGTH_PENALTY = 0.0147


def conversation_pages(source: Source, *, name: str | None = None) -> Iterator[list[Conversation]]:
    """An eval file of either format as conversations, a page at a time (the format is detected from
    its first row; `healthbench.data.jsonl.read_eval_pages`)."""
    from healthbench.data.jsonl import read_eval_pages  # (msgspec loads with the reader, not with config)

    return map(conversations_of, read_eval_pages(source, name=name)[1])


def read_conversations(source: Source, *, name: str | None = None) -> list[Conversation]:
    """An eval file of either format as conversations (`conversation_pages`, gathered)."""
    return [record for page in conversation_pages(source, name=name) for record in page]


def resolve_format(requested: str | None, data: Path | None) -> Format:
    """The format of a run's data: ``--format`` checked against the file, else detected."""
    if requested is not None and requested not in (CLASSIC, PROFESSIONAL):
        raise DataError(f"--format must be {CLASSIC} or {PROFESSIONAL}, got {requested!r}")
    if data is None:
        if requested == PROFESSIONAL:
            raise DataError(
                "--format professional needs --data PATH (HealthBench Professional is not downloaded)"
            )
        return CLASSIC
    found = file_format(data)
    if requested is not None and requested != found:
        raise DataError(
            f"--format {requested}, but the file is in the {FORMAT_NAMES[found]} format", path=str(data)
        )
    return found


def describe_professional(
    judge: str, reasoning_effort: str | None, center: float | None, penalty: float | None
) -> str:
    """The line that says which Professional settings a run uses and what upstream uses."""
    upstream = (
        f"upstream grades with {PROFESSIONAL_JUDGE} at {PROFESSIONAL_REASONING_EFFORT} reasoning effort"
    )
    length = (
        "no length adjustment"
        if center is None
        else f"overall_score_length_adjusted with center {center:g} characters, "
        f"{penalty:g} per 500 characters"
    )
    effort = reasoning_effort or "default"
    return f"HealthBench Professional: judge {judge} at {effort} reasoning effort ({upstream}); {length}"


def professional_defaults(*, judge_given: bool) -> dict[str, Any]:
    """Upstream's Professional settings as a config layer below the user's own (flags, config file)."""
    layer: dict[str, Any] = {
        "scoring": {
            "length_center": PROFESSIONAL_LENGTH_CENTER,
            "length_penalty": PROFESSIONAL_LENGTH_PENALTY,
        }
    }
    if not judge_given:
        layer["judge"] = {
            "spec": PROFESSIONAL_JUDGE,
            "settings": {"reasoning_effort": PROFESSIONAL_REASONING_EFFORT},
        }
    return layer
