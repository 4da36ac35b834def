"""The judge's prompt: our own grader template, or a user's file with the same placeholders.

A template is plain text with two placeholders, ``<<conversation>>`` (every turn as ``role: content``,
joined by blank lines, the candidate's answer as the last assistant turn) and ``<<rubric_item>>``
(``[points] criterion`` for HealthBench rubrics, the bare criterion for meta-eval rows). These are
the placeholders simple-evals uses, so its official grader text can be passed with
``--grader-template FILE`` as is, or fetched from its source with ``--grader-template simple-evals``
(see `healthbench.grading.official`).

A third, optional placeholder, ``<<cache_break>>``, marks where the part of the prompt shared by all
of a conversation's criteria ends (it must come after ``<<conversation>>`` and before
``<<rubric_item>>``): the prompt is then sent as two user messages split there, so that providers
that cache prompt prefixes can bill the first at their cached rate, and the provider adapters mark
the split for the provider (Anthropic's ``cache_control``, OpenAI's ``prompt_cache_key``; see
docs/cost.md). Our built-in template is written that way: instructions and worked examples first,
then the conversation and reply, the rubric item last. A template without it is sent as one user
message, exactly as before (simple-evals' template among them).

The built-in template of earlier versions (``builtin-v1``: the conversation, then the rubric item,
then the instructions) is kept so that a run started with it continues with it (`run_template`).
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
CACHE_BREAK = "<<cache_break>>"
BUILTIN_V1 = "builtin-v1"  # the --grader-template value of the earlier built-in template

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
        breaks = self.text.count(CACHE_BREAK)
        if breaks > 1 or (
            breaks
            and not self.text.index(CONVERSATION)
            < self.text.index(CACHE_BREAK)
            < self.text.index(RUBRIC_ITEM)
        ):
            raise ConfigError(
                f"grader template {self.source}: {CACHE_BREAK} may appear once, after {CONVERSATION} "
                f"and before {RUBRIC_ITEM}"
            )
        head, tail = self.text.split(CONVERSATION)
        object.__setattr__(self, "_parts", (head, tail))

    @property
    def cache_first(self) -> bool:
        """The prompt is sent in two messages: the part shared by a conversation's criteria, then the
        criterion (`CACHE_BREAK`)."""
        return CACHE_BREAK in self.text

    @property
    def prefix_chars(self) -> int:
        """The characters of the template's own text before the rubric item (the part of every prompt
        that, with the conversation, is shared by a conversation's criteria)."""
        before = self.text[: self.text.index(RUBRIC_ITEM)]
        return len(before.replace(CONVERSATION, "").replace(CACHE_BREAK, ""))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def render(self, conversation: Sequence[Mapping[str, str]], rubric_item: str) -> str:
        """The judge's user message for one criterion."""
        return "\n\n".join(self.render_parts(conversation, rubric_item))

    def render_parts(self, conversation: Sequence[Mapping[str, str]], rubric_item: str) -> list[str]:
        """The judge's user messages for one criterion: the whole prompt, or (a template with
        `CACHE_BREAK`) the shared part and the criterion's part, each stripped of the blank space
        around the break."""
        convo = "\n\n".join(f"{m['role']}: {m['content']}" for m in conversation)
        # Substitute the rubric item first so a conversation that happens to contain the text
        # "<<rubric_item>>" cannot be rewritten.
        head, tail = self._parts
        if CACHE_BREAK not in tail:
            return [head.replace(RUBRIC_ITEM, rubric_item) + convo + tail.replace(RUBRIC_ITEM, rubric_item)]
        middle, rest = tail.split(CACHE_BREAK)
        return [(head + convo + middle).rstrip(), rest.lstrip().replace(RUBRIC_ITEM, rubric_item)]


def builtin_template() -> GraderTemplate:
    """Our grader template (cache-first: see the module's docstring)."""
    text = (resources.files("healthbench.grading") / "grader_prompt.txt").read_text(encoding="utf-8")
    return GraderTemplate(text.strip(), "builtin")


def builtin_v1_template() -> GraderTemplate:
    """The built-in template of earlier versions (kept for the runs started with it)."""
    text = (resources.files("healthbench.grading") / "grader_prompt_v1.txt").read_text(encoding="utf-8")
    return GraderTemplate(text.strip(), BUILTIN_V1)


def run_template(
    path: str | Path | None, cache_dir: str | Path | None, recorded_sha256: str | None
) -> GraderTemplate:
    """The template of a stored run (its ``grader_template`` setting and the sha256 it recorded): a
    run started with the earlier built-in template (no ``--grader-template``) keeps it, so resuming
    it never switches prompt halfway (nor re-asks the criteria it had graded)."""
    if path is None and recorded_sha256 == builtin_v1_template().sha256:
        return builtin_v1_template()
    return load_template(path, cache_dir)


def load_template(path: str | Path | None, cache_dir: str | Path | None = None) -> GraderTemplate:
    """The built-in template, the earlier built-in one (``"builtin-v1"``), simple-evals'
    (``"simple-evals"``: fetched once into ``cache_dir``, see `healthbench.grading.official`), or the
    file at ``path`` (must contain both placeholders once)."""
    if path is None:
        return builtin_template()
    if str(path) == BUILTIN_V1:
        return builtin_v1_template()
    if str(path) == OFFICIAL_NAME:
        return GraderTemplate(official_grader_text(cache_dir), OFFICIAL_NAME)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"grader template {path}: cannot read ({exc})") from None
    return GraderTemplate(text.strip(), str(path))
