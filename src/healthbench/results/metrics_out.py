"""The flat metrics JSON written by ``--metrics-out`` (key families documented in docs/metrics.md).

Keys keep the order `RunScore.metrics()` gives them (simple-evals' first-seen order), indented by 2;
NaN and infinities, which JSON cannot carry, are written as ``null``.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from healthbench.atomic import atomic_writer
from healthbench.models.tally import CallTally

if TYPE_CHECKING:
    from healthbench.results.panel_scores import PanelFigures


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (recursively through dicts and lists)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


@contextmanager
def atomic_text_file(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A text file written in the target's directory and renamed onto ``path`` only when the block
    ends without an error (readers never see a half-written file; a failure leaves no file). It
    gets the usual permissions (see `healthbench.atomic`)."""
    with atomic_writer(path) as raw, io.TextIOWrapper(raw, encoding="utf-8") as out:
        yield out


def write_json_atomic(
    path: str | os.PathLike[str], payload: Any, *, indent: int | None = 2, ensure_ascii: bool = True
) -> Path:
    """Write ``payload`` as JSON atomically, with the usual permissions."""
    text = json.dumps(json_safe(payload), indent=indent, ensure_ascii=ensure_ascii, allow_nan=False)
    with atomic_text_file(path) as out:
        out.write(text)
        out.write("\n")
    return Path(path)


TOKEN_KINDS = ("input", "cached_input", "cache_write_input", "output")


def usage_metrics(candidate: CallTally | None, judge: CallTally) -> dict[str, Any]:
    """A run's cost and tokens as metrics keys: ``cost_usd`` (None when some call's model has no
    price: unknown stays unknown), ``cost_usd:candidate``, ``cost_usd:judge``, and
    ``tokens:<role>:input|cached_input|cache_write_input|output`` (input counts every input token,
    the cached and cache-written ones included). Calls answered from the call cache cost nothing.
    ``candidate`` None: a run without one (meta-eval), whose keys are the judge's only."""
    roles = {"judge": judge} if candidate is None else {"candidate": candidate, "judge": judge}
    costs = {role: tally.known_cost for role, tally in roles.items()}
    out: dict[str, Any] = {
        "cost_usd": None if None in costs.values() else sum(c for c in costs.values() if c is not None)
    }
    out.update({f"cost_usd:{role}": cost for role, cost in costs.items()})
    for role, tally in roles.items():
        out.update({f"tokens:{role}:{kind}": count for kind, count in tally.token_counts().items()})
    return out


def panel_metrics(figures: PanelFigures) -> dict[str, Any]:
    """A panel's keys (docs/metrics.md): ``panel_rule``, ``judge_agreement``, ``judge_fleiss_kappa``,
    then each member's own ``judge:<label>:overall_score`` and ``judge:<label>:axis:<axis>`` (the
    means of `score_run` on that member's verdicts), members in panel order."""
    out: dict[str, Any] = {
        "panel_rule": figures.rule,
        "judge_agreement": figures.agreement,
        "judge_fleiss_kappa": figures.fleiss_kappa,
    }
    for label in figures.members:
        stats = figures.scores[label].stats
        overall = stats.get("overall_score")
        out[f"judge:{label}:overall_score"] = overall.mean if overall is not None else None
        for key in sorted(k for k in stats if k.startswith("axis:") and k.count(":") == 1):
            out[f"judge:{label}:{key}"] = stats[key].mean
    return out


def metrics_document(
    metrics: Mapping[str, Any],
    *extra: Mapping[str, Any],
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The flat metrics JSON of a run, the one builder of every metrics-shaped output (``--metrics-out``
    of run, regrade, results and meta-eval, the service's ``metrics`` download): ``metrics`` in their
    order, then any ``extra`` families (``--correct-with``'s corrected scores), then the run's
    ``provenance`` keys (``profile``, ``grader_template_sha256``) when given; non-finite floats as None."""
    document: dict[str, Any] = dict(metrics)
    for family in extra:
        document.update(family)
    document.update(provenance or {})
    return dict(json_safe(document))


def write_metrics(
    path: str | os.PathLike[str],
    metrics: Mapping[str, Any],
    *extra: Mapping[str, Any],
    provenance: Mapping[str, Any] | None = None,
) -> Path:
    """Write `metrics_document` atomically, indented by 2."""
    return write_json_atomic(path, metrics_document(metrics, *extra, provenance=provenance), indent=2)
