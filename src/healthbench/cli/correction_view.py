"""The terminal table of `healthbench results RUN --correct-with META_RUN`: raw next to corrected."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from healthbench.scoring.correction import POOLED, CorrectionResult
from healthbench.scoring.rubric import OVERALL


def shown_keys(result: CorrectionResult) -> list[str]:
    """Overall, then themes, then axes (each sorted), as the run summary shows them."""
    keys = [OVERALL] if OVERALL in result.keys else []
    for prefix in ("theme:", "axis:"):
        keys += sorted(k for k in result.keys if k.startswith(prefix))
    return keys


def render_correction(result: CorrectionResult, *, title: str, console: Console) -> None:
    table = Table(title=Text(title), title_justify="left", title_style="bold")
    for column in ("metric", "raw", "corrected", "95% CI (both uncertainties)", "n"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for key in shown_keys(result):
        value = result.keys[key]
        interval = (
            "-"
            if value.ci_lower is None or value.ci_upper is None
            else f"[{value.ci_lower:.4f}, {value.ci_upper:.4f}]"
        )
        table.add_row(Text(key), f"{value.raw:.4f}", f"{value.corrected:.4f}", interval, str(value.n_samples))
    console.print(table)
    model = result.model
    se, sp = model.sensitivity[POOLED], model.specificity[POOLED]
    lines = [
        f"judge error rates from {int(result.cells.counts.sum())} meta-eval rows "
        f"({result.cells.dropped_rows} left out: physician ties or ungraded): pooled sensitivity {se:.3f}, "
        f"specificity {sp:.3f}; {len(model.used)} categories with their own estimate, "
        f"{len(model.fallback)} use the pooled one (too few rows or too close to chance)",
    ]
    if result.unstable_draws:
        lines.append(
            f"no corrected CI: in {result.unstable_draws} of {result.n_resamples} bootstrap draws a judge's "
            "sensitivity + specificity fell too close to 1 (the correction is unstable with this meta-eval)"
        )
    for line in lines:
        console.print(Text(line))
