"""The judge's prompt: our own grader template, or a user's file with the same placeholders.

A template is plain text with two placeholders, ``<<conversation>>`` (every turn as ``role: content``,
joined by blank lines, the candidate's answer as the last assistant turn) and ``<<rubric_item>>``
(``[points] criterion`` for HealthBench rubrics, the bare criterion for meta-eval rows). These are
the placeholders simple-evals uses, so its official grader text can be passed with
``--grader-template FILE`` as is, or fetched from its source with ``--grader-template simple-evals``
(see `healthbench.grading.official`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from healthbench.errors import ConfigError
from healthbench.grading.official import OFFICIAL_NAME, official_grader_text

CONVERSATION = "<<conversation>>"
RUBRIC_ITEM = "<<rubric_item>>"

JUDGE_SCHEMA: dict[str, object] = {
    "type": "object",
    # a bounded explanation keeps constrained decoding (local models) from rambling until max_tokens
    "properties": {"explanation": {"type": "string", "maxLength": 300}, "criteria_met": {"type": "boolean"}},
    "required": ["explanation", "criteria_met"],
}


@dataclass(frozen=True)
class GraderTemplate:
    """A validated grader template and where it came from."""

    text: str
    source: str = "builtin"
    # the text before and after <<conversation>>, split once (`render` is called for every judge call)
    _parts: tuple[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for placeholder in (CONVERSATION, RUBRIC_ITEM):
            if self.text.count(placeholder) != 1:
                raise ConfigError(
                    f"grader template {self.source}: must contain {placeholder} exactly once "
                    f"(found {self.text.count(placeholder)})"
                )
        head, tail = self.text.split(CONVERSATION)
        object.__setattr__(self, "_parts", (head, tail))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def render(self, conversation: Sequence[Mapping[str, str]], rubric_item: str) -> str:
        """The judge's user message for one criterion."""
        convo = "\n\n".join(f"{m['role']}: {m['content']}" for m in conversation)
        # Substitute the rubric item first so a conversation that happens to contain the text
        # "<<rubric_item>>" cannot be rewritten.
        head, tail = self._parts
        return head.replace(RUBRIC_ITEM, rubric_item) + convo + tail.replace(RUBRIC_ITEM, rubric_item)


def builtin_template() -> GraderTemplate:
    text = (resources.files("healthbench.grading") / "grader_prompt.txt").read_text(encoding="utf-8")
    return GraderTemplate(text.strip(), "builtin")


def load_template(path: str | Path | None, cache_dir: str | Path | None = None) -> GraderTemplate:
    """The built-in template, simple-evals' (``"simple-evals"``: fetched once into ``cache_dir``, see
    `healthbench.grading.official`), or the file at ``path`` (must contain both placeholders once)."""
    if path is None:
        return builtin_template()
    if str(path) == OFFICIAL_NAME:
        return GraderTemplate(official_grader_text(cache_dir), OFFICIAL_NAME)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"grader template {path}: cannot read ({exc})") from None
    return GraderTemplate(text.strip(), str(path))
