"""Import and export simple-evals' HealthBench ``_allresults.json`` files.

The file holds ``score``, ``metrics`` (every metric with ``:n_samples`` and ``:bootstrap_std``),
``htmls``, ``convos`` and ``metadata.example_level_metadata``: one entry per graded answer with its
``rubric_items`` (criterion, points, tags, criteria_met, explanation), ``prompt`` (the messages as
sent, system message included), ``completion``, ``usage``, ``prompt_id`` and ``completion_id``.

It stores no example tags, so ``theme:`` and ``physician_agreed_category:`` metrics need the dataset
the run used, joined on ``prompt_id``. Everything else is rebuilt from the stored verdicts.
"""

from __future__ import annotations

import hashlib
import html as html_lib
import json
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Any, cast

import msgspec

from healthbench.data.jsonl import Source
from healthbench.data.roles import Role
from healthbench.data.shapes import ClassicLine, RubricEntry, Turn
from healthbench.data.shapes import Message as RawMessage
from healthbench.results.allresults_reader import (
    Answer,
    DatasetRubrics,
    Example,
    Verdicted,
    decode_allresults,
)
from healthbench.results.allresults_reader import texts as decoded_texts
from healthbench.results.metrics_out import write_json_atomic
from healthbench.scoring.rubric import OVERALL, Scored
from healthbench.scoring.run_score import GradedSample, RunScore
from healthbench.scoring.verdict import Verdict

MET = operator.attrgetter("criteria_met")
VERDICTS = {True: Verdict.MET, False: Verdict.NOT_MET, None: Verdict.UNGRADED}  # criteria_met -> verdict
USAGE_KEYS = (
    "input_tokens",
    "input_cached_tokens",
    "output_tokens",
    "output_reasoning_tokens",
    "total_tokens",
)


@dataclass(frozen=True)
class AllResults:
    """A parsed ``_allresults.json``: the graded samples and the numbers the file itself reports."""

    samples: list[GradedSample]
    score: float | None
    metrics: dict[str, Any]


def completion_id(prompt_id: str, completion: str) -> str:
    """simple-evals' id of a graded answer: sha256 of the prompt id followed by the answer text."""
    return hashlib.sha256((prompt_id + completion).encode("utf-8")).hexdigest()


# --- reading -------------------------------------------------------------------------------------------


def read_allresults(
    source: Source,
    conversations: Mapping[str, Scored] | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
) -> list[GradedSample]:
    """The graded samples of an ``_allresults.json`` (see `load_allresults`)."""
    return load_allresults(source, conversations, allow_missing=allow_missing, name=name).samples


class Interned:
    """Rubric criteria and conversations shared by the files read with one instance (runs of the same
    dataset then share their conversation objects): rebuilt from the file as the dataset reader's
    shapes (`healthbench.data.shapes`), never as pydantic records."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, float, tuple[str, ...]], RubricEntry] = {}
        self.conversations: dict[tuple[object, ...], ClassicLine] = {}
        self.prompts: dict[tuple[str, ...], tuple[dict[str, str], ...]] = {}

    def item(self, raw: Verdicted) -> RubricEntry:
        key = (raw.criterion, raw.points, raw.tags)
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = RubricEntry(raw.criterion, raw.points, raw.tags)
        return item

    def prompt(self, messages: Sequence[RawMessage], contents: Sequence[str]) -> tuple[dict[str, str], ...]:
        """The messages as sent (their ``contents`` decoded); equal prompts (a dataset's, in every run)
        are one object."""
        roles = [m.role for m in messages]
        key = (*roles, *contents)
        prompt = self.prompts.get(key)
        if prompt is None:
            n = len(roles)
            prompt = self.prompts[key] = tuple(
                {"role": role, "content": text} for role, text in zip(key[:n], key[n:], strict=True)
            )
        return prompt

    def conversation(
        self, prompt_id: str, prompt: tuple[dict[str, str], ...], items: list[RubricEntry]
    ) -> ClassicLine:
        """A conversation without a dataset entry (no example tags; its roles checked by the reader)."""
        key = (prompt_id, id(prompt), *map(id, items))  # (prompts are interned: `prompt`)
        conversation = self.conversations.get(key)
        if conversation is None:
            turns = [Turn(cast(Role, m["role"]), m["content"]) for m in prompt]
            conversation = self.conversations[key] = ClassicLine(turns, prompt_id, items)
        return conversation


def load_allresults(
    source: Source,
    conversations: Mapping[str, Scored] | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
    interned: Interned | None = None,
    texts: bool = True,
) -> AllResults:
    """Parse an ``_allresults.json`` (a path, or its bytes with ``name`` for messages) through the one
    reader (`healthbench.results.allresults_reader.decode_allresults`): every missing or odd field
    is a `DataError` naming the file, the example index and the field.

    With ``conversations`` (the dataset, by ``prompt_id``) each sample takes the dataset's
    conversation, so its example tags, and its stored rubric must equal the dataset's. A prompt_id
    absent from ``conversations`` is an error unless ``allow_missing``, in which case that sample
    keeps no example tags. Without ``conversations`` the conversation is rebuilt from the file
    (prompt = the messages as sent, no example tags). Answers to the same prompt_id are numbered
    ``repeat`` 0, 1, ... in file order. Files read with the same ``interned`` share their rubric
    items and rebuilt conversations.

    Without ``texts`` (what scores need: `healthbench.results.allresults_reader`'s second schema) no
    completion, usage nor explanation is read: each sample's completion is ``""``, its explanations,
    prompt messages and usage are absent, and only rebuilt conversations decode their prompt.
    """
    if not texts:
        answers = load_answers(
            source, conversations, allow_missing=allow_missing, name=name, interned=interned
        )
        verdicts = iter(map(VERDICTS.__getitem__, answers.met))
        samples = [
            GradedSample(conversation, "", tuple(islice(verdicts, n)), repeat=repeat)
            for conversation, n, repeat in zip(
                answers.conversations, answers.n_items, answers.repeats, strict=True
            )
        ]
        return AllResults(samples, answers.score, answers.metrics)
    interned = interned or Interned()
    decoded = decode_allresults(
        source, dataset_rubrics(conversations), allow_missing=allow_missing, name=name
    )
    examples = cast(list[Example], decoded.examples)
    # the texts of the file decoded in a few calls (a call per text is most of the time)
    contents = iter(decoded_texts([m.content for e in examples for m in e.prompt]))
    prompts = [interned.prompt(e.prompt, list(islice(contents, len(e.prompt)))) for e in examples]
    answered, repeats = _answered(examples, conversations, interned, prompts.__getitem__)
    completions = decoded_texts([e.completion[0].content for e in examples])
    explanations = iter(_explanations([i.explanation for e in examples for i in e.rubric_items]))
    usages = _usages([e.usage for e in examples])
    samples = [
        GradedSample(
            conversation=known,
            completion=completions[index],
            verdicts=tuple(map(VERDICTS.__getitem__, map(MET, example.rubric_items))),
            explanations=tuple(islice(explanations, len(example.rubric_items))),
            repeat=repeats[index],
            prompt_messages=prompts[index],
            usage=usages[index],
        )
        for index, (example, known) in enumerate(zip(examples, answered, strict=True))
    ]
    return AllResults(samples, decoded.score, decoded.metrics)


@dataclass(frozen=True)
class Answers:
    """A file's answers as columns, what scores read (no completion, usage, explanation nor prompt
    messages): per answer its conversation, its repeat and its number of criteria, per criterion its
    ``criteria_met`` (one answer's after another's), and the numbers the file reports."""

    conversations: list[Scored]
    repeats: list[int]
    n_items: list[int]
    met: list[bool | None]
    score: float | None
    metrics: dict[str, Any]


def load_answers(
    source: Source,
    conversations: Mapping[str, Scored] | None = None,
    *,
    allow_missing: bool = False,
    name: str | None = None,
    interned: Interned | None = None,
    rubrics: DatasetRubrics | None = None,
) -> Answers:
    """An ``_allresults.json`` read without texts (`load_allresults` with ``texts=False``, as columns:
    no sample per answer): only rebuilt conversations decode their prompt. ``rubrics``:
    `dataset_rubrics` of ``conversations``, made once for many files (default: for this one)."""
    interned = interned or Interned()
    expected = rubrics if rubrics is not None else dataset_rubrics(conversations)
    decoded = decode_allresults(source, expected, allow_missing=allow_missing, name=name, texts=False)
    examples = decoded.examples
    prompted = [e for e in examples if conversations is None or e.prompt_id not in conversations]
    contents = iter(decoded_texts([m.content for e in prompted for m in e.prompt]))

    def prompt(index: int) -> tuple[dict[str, str], ...]:  # (asked in file order)
        messages = examples[index].prompt
        return interned.prompt(messages, list(islice(contents, len(messages))))

    answered, repeats = _answered(examples, conversations, interned, prompt)
    rubric_items = list(map(_RUBRIC_ITEMS, examples))
    return Answers(
        answered,
        repeats,
        list(map(len, rubric_items)),
        list(map(MET, chain.from_iterable(rubric_items))),
        decoded.score,
        decoded.metrics,
    )


_RUBRIC_ITEMS = operator.attrgetter("rubric_items")


def dataset_rubrics(conversations: Mapping[str, Scored] | None) -> DatasetRubrics | None:
    """The dataset's rubrics by prompt_id, what the reader checks a file's against (one for many files)."""
    if conversations is None:
        return None
    return DatasetRubrics({p: c.rubrics for p, c in conversations.items()})


def _answered(
    examples: Sequence[Example | Answer],
    conversations: Mapping[str, Scored] | None,
    interned: Interned,
    prompt: Callable[[int], tuple[dict[str, str], ...]],
) -> tuple[list[Scored], list[int]]:
    """Per example its conversation (the dataset's, else rebuilt from the file with ``prompt``, asked
    for those examples' indices in file order) and its repeat (0, 1, ... per prompt_id in file order)."""
    prompt_ids = [e.prompt_id for e in examples]
    answered: list[Scored | None] = (
        list(map(conversations.get, prompt_ids)) if conversations is not None else [None] * len(examples)
    )
    for index, known in enumerate(answered):
        if known is None:
            items = list(map(interned.item, examples[index].rubric_items))
            answered[index] = interned.conversation(prompt_ids[index], prompt(index), items)
    counts: dict[str, int] = {}
    repeats: list[int] = []
    for prompt_id in prompt_ids:
        repeat = counts.get(prompt_id, 0)
        counts[prompt_id] = repeat + 1
        repeats.append(repeat)
    return cast(list[Scored], answered), repeats


def _explanations(raws: list[msgspec.Raw]) -> list[str | None]:
    """Explanations as text: graders sometimes return structured ones, kept as their JSON."""
    values: list[Any] = msgspec.json.decode(b"[" + b",".join(raws) + b"]")
    return [v if v is None or isinstance(v, str) else json.dumps(v) for v in values]


def _usages(raws: list[msgspec.Raw]) -> list[dict[str, Any] | None]:
    """Usage objects (or null), in one call; one whose every value is null is None."""
    values: list[dict[str, Any] | None] = msgspec.json.decode(
        b"[" + b",".join(raws) + b"]", type=list[dict[str, Any] | None]
    )
    return [v if v is not None and any(x is not None for x in v.values()) else None for v in values]


# --- writing -------------------------------------------------------------------------------------------


def allresults_metrics(run_score: RunScore) -> tuple[float | None, dict[str, float | int]]:
    """simple-evals' ``score`` and ``metrics``: per key its mean, ``:n_samples`` and ``:bootstrap_std``
    in first-seen order, with the ``score`` mean moved out to the top level."""
    metrics: dict[str, float | int] = {}
    for key, stats in run_score.stats.items():
        if key != "score":
            metrics[key] = stats.mean
        metrics[f"{key}:n_samples"] = stats.n_samples
        metrics[f"{key}:bootstrap_std"] = stats.bootstrap_std
    score = run_score.stats.get("score")
    return (score.mean if score is not None else None), metrics


def write_allresults(
    path: str | os.PathLike[str],
    samples: Sequence[GradedSample],
    run_score: RunScore,
    *,
    html: bool = False,
    provenance: Mapping[str, Any] | None = None,
    members: Sequence[Mapping[str, GradedSample]] | None = None,
) -> Path:
    """Write ``samples`` scored by ``run_score`` as simple-evals lays out ``_allresults.json``.

    Ungraded criteria are written with ``criteria_met: null`` and their sample with ``score: null``
    (simple-evals never writes either; such samples are left out of ``metrics``). ``htmls`` holds one
    short HTML summary per sample when ``html`` is set, else it is empty. ``provenance`` (profile,
    grader prompt sha256) is added to ``metadata`` next to ``example_level_metadata``. Atomic.

    A panel of judges' run (``members``: each sample's members' own samples, by label in panel
    order) writes the panel's verdict as ``criteria_met`` and every member's beside it in each rubric
    item, ``judge_verdicts: {label: true|false|null}`` (simple-evals readers ignore the key).
    """
    if len(run_score.per_sample) != len(samples):
        raise ValueError(f"{len(samples)} samples but the run score covers {len(run_score.per_sample)}")
    if members is not None and len(members) != len(samples):
        raise ValueError(f"{len(samples)} samples but {len(members)} panels of members' verdicts")
    score, metrics = allresults_metrics(run_score)
    convos: list[list[dict[str, str]]] = []
    examples: list[dict[str, Any]] = []
    htmls: list[str] = []
    for index, (sample, sample_metrics) in enumerate(zip(samples, run_score.per_sample, strict=True)):
        prompt = _prompt_of(sample)
        answer = [{"content": sample.completion, "role": "assistant"}]
        example_score = sample_metrics[OVERALL] if sample_metrics is not None else None
        convos.append([*prompt, *answer])
        examples.append(
            {
                "score": example_score,
                "usage": dict(sample.usage) if sample.usage is not None else dict.fromkeys(USAGE_KEYS),
                "rubric_items": _graded_items(sample, members[index] if members is not None else None),
                "prompt": prompt,
                "completion": answer,
                "prompt_id": sample.conversation.prompt_id,
                "completion_id": completion_id(sample.conversation.prompt_id, sample.completion),
            }
        )
        if html:
            htmls.append(_html(sample, example_score))
    document = {
        "score": score,
        "metrics": metrics,
        "htmls": htmls,
        "convos": convos,
        "metadata": {"example_level_metadata": examples, **(provenance or {})},
    }
    return write_json_atomic(path, document, indent=2)


def _prompt_of(sample: GradedSample) -> list[dict[str, str]]:
    if sample.prompt_messages is not None:
        return [dict(message) for message in sample.prompt_messages]
    return [{"role": message.role, "content": message.content} for message in sample.conversation.prompt]


def _graded_items(
    sample: GradedSample, members: Mapping[str, GradedSample] | None = None
) -> list[dict[str, Any]]:
    explanations = sample.explanations or (None,) * len(sample.verdicts)
    items: list[dict[str, Any]] = [
        {
            "criterion": item.criterion,
            "points": item.points,
            "tags": list(item.tags),
            "criteria_met": verdict.criteria_met,
            "explanation": explanation,
        }
        for item, verdict, explanation in zip(
            sample.conversation.rubrics, sample.verdicts, explanations, strict=True
        )
    ]
    if members is not None:
        for index, item in enumerate(items):
            item["judge_verdicts"] = {
                label: member.verdicts[index].criteria_met for label, member in members.items()
            }
    return items


def _html(sample: GradedSample, score: float | None) -> str:
    shown = "ungraded" if score is None else f"{score:.4f}"
    lines = "".join(
        f"<li>[{verdict.criteria_met}] {html_lib.escape(f'[{item.points}] {item.criterion}')}</li>"
        for item, verdict in zip(sample.conversation.rubrics, sample.verdicts, strict=True)
    )
    return (
        f"<h3>{html_lib.escape(sample.conversation.prompt_id)} (repeat {sample.repeat})</h3>"
        f"<p>Score: {shown}</p><ul>{lines}</ul>"
    )
