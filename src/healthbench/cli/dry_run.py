"""Printing a `--dry-run` estimate (run, regrade, meta-eval): calls, tokens and cost per role."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from healthbench.cli.app import console, say
from healthbench.runner.estimate import RoleEstimate, total_cost


def print_estimate(title: str, rows: list[RoleEstimate]) -> None:
    table = Table(title=Text(title))
    table.add_column("role")
    table.add_column("model", overflow="fold")  # long names wrap, never cut
    for column in ("calls", "input\ntokens", "output\ntokens", "est. cost\n(USD)", "with --batch\n(USD)"):
        table.add_column(column, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            Text(r.role),
            Text(r.model),
            f"{r.calls:,}",
            f"{r.input_tokens:,}",
            f"{r.output_tokens:,}",
            _usd(r.cost),
            _usd(r.batch_cost),
        )
    console.print(table)
    total = total_cost(rows)
    cost = "unknown (a model has no price; see --prices)" if total is None else f"${total:,.2f}"
    say(f"estimated total: {cost} — tokens estimated at 4 characters each; cached calls cost nothing")
    for judged in (r for r in rows if r.role == "judge" and r.cached_input_tokens):  # each member's
        say(
            f"judge input read from the provider's prompt cache: {judged.cached_share or 0:.0%} "
            f"({judged.cached_input_tokens:,} tokens of {judged.model}, priced so above); this assumes its "
            "provider caches prompt prefixes and that each conversation's first criterion answers before "
            "the others (warm-first; see docs/cost.md); the batch prices assume the same share"
        )
    if total is not None:
        judge, every = total_cost(rows, {"judge"}), total_cost(rows, {"judge", "candidate"})
        say(f"with batch pricing: ${judge:,.2f} with --batch judge, ${every:,.2f} with --batch all")


def _usd(cost: float | None) -> str:
    return "unknown price" if cost is None else f"{cost:,.2f}"
