"""The HTML report: one self-contained file (styles, script and data inline) that works offline.

`build_report` scores the runs (`score_run`, the same numbers every other output shows) and
`Report.write` lays them out with the jinja template in ``analysis/templates/``. The summary is
embedded as JSON (``<`` escaped, so no text can close the script element) and also rendered as
tables; the conversations are embedded once as gzip-compressed JSON in base64 (a 5,000-conversation
run stays well under 25 MB) that the page decompresses in the browser and renders lazily: only the
visible rows of the browser, and a conversation's details when it is opened.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import msgspec

from healthbench.analysis.report_data import (
    ReportInput,
    ScoredRun,
    comparison_summary,
    report_conversations,
    report_summary,
)
from healthbench.atomic import atomic_writer
from healthbench.results.metrics_out import json_safe
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.scoring.stats import BootstrapOptions

if TYPE_CHECKING:
    from healthbench.analysis.compare import Comparison, GateDecision
    from healthbench.analysis.inputs import LoadedRun

_TEMPLATES = "templates"
DEFAULT_TITLE = "HealthBench report"
# the report's Content-Security-Policy (its <meta> in report.html.j2, and the service's header)
REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"


def score_inputs(runs: Sequence[ReportInput], options: ScoringOptions | None = None) -> list[ScoredRun]:
    """Each input with its `RunScore` (and its cost when the input carries one; a panel of judges'
    run, its members' figures: `healthbench.analysis.report_judges`)."""
    return [
        ScoredRun(
            model=run.model,
            run_id=run.run_id,
            samples=run.samples,
            score=score_run(run.samples, options),
            cost=getattr(run, "cost", None),
            usage=getattr(run, "usage", None),
            judges=_judges(run, options),
        )
        for run in runs
    ]


def _judges(run: ReportInput, options: ScoringOptions | None) -> dict[str, Any] | None:
    members = getattr(run, "members", None)
    if not members:
        return None
    from healthbench.analysis.report_judges import judges_summary

    return judges_summary(run.samples, members, rule=str(getattr(run, "panel_rule", "")), options=options)


def json_for_script(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>`` and ``&`` escaped, so
    user text such as ``</script>`` or ``<!--`` cannot end the element; NaN written as null."""
    text = json.dumps(json_safe(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def encode_conversations(parts: Iterable[Any]) -> str:
    """`write_conversations` as text (for tests and small data)."""
    out = io.BytesIO()
    write_conversations(parts, out)
    return out.getvalue().decode("ascii")


def write_conversations(parts: Iterable[Any], out: BinaryIO) -> None:
    """Write the browser's data as base64 of gzip-compressed JSON (deterministic: no timestamp),
    streamed: ``parts`` (`healthbench.analysis.report_data.report_conversations`: JSON text, or
    values encoded one at a time by msgspec, compact UTF-8) go through the compressor and the
    base64 encoder in chunks, so a full run's ~56 MB of JSON never exists as one string.

    Level 2 and an 8 (of 9) memory level: a full run's 56 MB of JSON in 0.51 CPU-s, 22.4 MB in
    base64 (level 3: 0.72 s, 21.6 MB; level 5: 1.2 s, 19.2 MB; level 1: 0.44 s, 23.7 MB; target: a
    full run's report under 25 MB, built in 2 s). Its numbers (scores, points) are finite."""
    compressor = zlib.compressobj(2, zlib.DEFLATED, 31, 8)  # wbits 31: a gzip stream, mtime 0
    pending = b""  # compressed bytes not yet encoded (base64 encodes 3 bytes at a time)
    batch: list[bytes] = []
    size = 0

    def flush(compressed: bytes) -> None:
        nonlocal pending
        pending += compressed
        whole = len(pending) - len(pending) % 3
        if whole:
            out.write(base64.b64encode(pending[:whole]))
            pending = pending[whole:]

    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else msgspec.json.encode(part)
        batch.append(data)
        size += len(data)
        if size >= _CHUNK:
            flush(compressor.compress(b"".join(batch)))
            batch, size = [], 0
    flush(compressor.compress(b"".join(batch)) + compressor.flush())
    out.write(base64.b64encode(pending))


_CHUNK = 1 << 20  # bytes of JSON compressed at a time
_PLACEHOLDER = "@@healthbench-report-conversations@@"  # where the streamed data goes in the page


@dataclass(frozen=True)
class Report:
    """Scored runs and the summary the report shows; render it as HTML or as static figures."""

    runs: list[ScoredRun]
    summary: dict[str, Any]
    conversations: bool = True  # embed the conversation browser's data

    def html(self) -> str:
        """The report's self-contained HTML text."""
        out = io.BytesIO()
        self.write_to(out)
        return out.getvalue().decode("utf-8")

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the HTML report atomically; returns the path."""
        with atomic_writer(path) as out:
            self.write_to(out)
        return Path(path)

    def write_to(self, out: BinaryIO) -> None:
        """Write the HTML, the conversations streamed into it (`write_conversations`)."""
        page = render_html(self.runs, self.summary, conversations=self.conversations)
        head, marker, tail = page.partition(_PLACEHOLDER)
        out.write(head.encode("utf-8"))
        if marker:
            write_conversations(report_conversations(self.runs), out)
        out.write(tail.encode("utf-8"))

    def write_figures(self, out_dir: str | os.PathLike[str]) -> list[Path]:
        """PNG and SVG charts for papers (needs matplotlib); returns the files written."""
        from healthbench.analysis.figures import write_figures

        return write_figures(self.summary, out_dir)


def build_report(
    runs: Sequence[ReportInput],
    *,
    options: ScoringOptions | None = None,
    title: str = DEFAULT_TITLE,
    comparison: Comparison | None = None,
    gates: Sequence[GateDecision] = (),
    conversations: bool = True,
    judge_choices: Sequence[Mapping[str, Any]] = (),
) -> Report:
    """Score ``runs`` (in the order given: the first is the baseline of the charts) for a report;
    ``comparison`` (`healthbench.analysis.compare.compare_runs` of two of them) adds its section,
    with the decisions of its release ``gates`` (`Comparison.gates`) when given.
    Without ``conversations`` the page has no conversation browser (each full run adds ~11 MB).
    ``judge_choices`` (`healthbench.analysis.report_judges.stored_meta_evals`: meta-eval runs) add the
    "Which judge to pay for" section; a report of them alone has no eval run's sections."""
    if not runs and not judge_choices:
        raise ValueError("a report needs at least one run")
    scored = score_inputs(runs, options)
    shown = comparison_summary(comparison, gates) if comparison is not None else None
    summary = report_summary(scored, title=title, comparison=shown) | {"judge_choices": list(judge_choices)}
    return Report(scored, summary, conversations and bool(runs))


def default_comparison(
    runs: Sequence[LoadedRun], options: BootstrapOptions | None = None
) -> Comparison | None:
    """The comparison a report of ``runs`` shows: the second model against the first when the runs
    are of exactly two models (each model's runs pooled as repeats, as ``healthbench compare`` does),
    else the second run against the first when there are exactly two runs, else none."""
    from healthbench.analysis.compare import compare_runs
    from healthbench.analysis.inputs import merge_runs

    models = list(dict.fromkeys(run.model for run in runs))
    if len(models) == 2:
        sides = [merge_runs([run for run in runs if run.model == model]) for model in models]
    elif len(runs) == 2:
        sides = list(runs)
    else:
        return None
    return compare_runs(sides[0], sides[1], options)


def render_html(runs: Sequence[ScoredRun], summary: Mapping[str, Any], *, conversations: bool = True) -> str:
    """Lay out ``summary`` (from `report_summary`) with the template; the conversations' place is
    marked (`Report.write_to` streams them there)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_template_source),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["count"] = _count
    env.filters["plural"] = _plural
    env.filters["signed"] = _signed
    return env.get_template("report.html.j2").render(
        summary=summary,
        summary_json=json_for_script(summary),
        conversations_b64=_PLACEHOLDER if conversations else None,
        style=_template_source("report.css"),
        script=_template_source("report.js"),
        csp=REPORT_CSP,
    )


def script_hash() -> str:
    """The CSP source (``'sha256-...'``) of the report's one executable script element (its text is
    the fixed ``report.js``, the same in every report), so that a page with a strict policy (the
    service's console) can show a report without allowing inline scripts in general."""
    text = "\n" + _template_source("report.js") + "\n"  # as report.html.j2 wraps it
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def _template_source(name: str) -> str:
    return (resources.files("healthbench.analysis") / _TEMPLATES / name).read_text(encoding="utf-8")


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _signed(value: float | None, digits: int = 3) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:+.{digits}f}"


def _plural(value: int, one: str, many: str | None = None) -> str:
    return f"{value:,} {one if value == 1 else many or one + 's'}"
