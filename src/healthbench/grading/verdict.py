"""Turning a judge's raw text into a verdict: tolerant of fences and prose, strict about the boolean."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class ParsedVerdict:
    criteria_met: bool
    explanation: str


class VerdictParseError(ValueError):
    """The judge's answer holds no JSON object with a boolean ``criteria_met``."""


def _candidates(text: str) -> list[str]:
    found = [m.group(1) for m in _FENCE.finditer(text)]
    found.append(text)
    return found


def _objects(text: str) -> list[dict[str, object]]:
    """Every JSON object that starts at a '{' in ``text`` (first decodable ones first)."""
    objects: list[dict[str, object]] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            objects.append(value)
        start = text.find("{", end)
    return objects


def parse_verdict(text: str) -> ParsedVerdict:
    """The first JSON object carrying a JSON boolean ``criteria_met``.

    ``"criteria_met": "true"`` (a string), ``1`` or a missing key are rejected: a judge that does not
    answer with a boolean has not answered.
    """
    for chunk in _candidates(text.strip()):
        for obj in _objects(chunk):
            if "criteria_met" not in obj:
                continue
            met = obj["criteria_met"]
            if not isinstance(met, bool):
                raise VerdictParseError(f"criteria_met is {json.dumps(met)}, not a JSON boolean")
            explanation = obj.get("explanation", "")
            return ParsedVerdict(
                met, explanation if isinstance(explanation, str) else json.dumps(explanation)
            )
    raise VerdictParseError("no JSON object with a criteria_met field in the judge's answer")
