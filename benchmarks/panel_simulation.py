"""Simulation: judge panels against their members, with the fake server's judges of known error rates.

Run with ``python benchmarks/panel_simulation.py [--criteria 20000] [--calibration-rows 5000]
[--met-rate 0.5]``; docs/panels.md shows its output.

Each criterion is a judge prompt; its truth is the fake server's (`fake_verdict`), and each judge's
verdict is the fake's answer for its model name (`fake_judge_verdict`: ``-errNN`` flips the truth with
probability NN %, independently per judge; ``family-<F>-...`` members share their errors). The
calibrated rule is calibrated on separate meta-eval rows (one physician label = the truth) of the same
judges. Every figure is an error rate: the share of criteria whose verdict is not the truth; in
parentheses, theory: for the majority, unanimous and any rules the probability of an error when
members err independently given their family's error (`panel_theory`). A member's theory is its NN %.
The same model name gives the same verdicts in every scenario.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from healthbench.defaults import PANEL_RULES
from healthbench.scoring.meta import MetaRow
from healthbench.scoring.panel import agreement, calibration_from_meta, combine, fleiss_kappa
from healthbench.scoring.verdict import Verdict
from healthbench.testing.fake_server import fake_judge_verdict, fake_verdict, judge_errors

CATEGORY = "cluster:simulation"
SCENARIOS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("three independent judges at 20 %", ("judge-a-err20", "judge-b-err20", "judge-c-err20")),
    ("five independent judges at 20 %", tuple(f"judge-{c}-err20" for c in "abcde")),
    ("independent judges at 10, 20 and 30 %", ("judge-a-err10", "judge-b-err20", "judge-c-err30")),
    (
        "one accurate judge (5 %), two poor ones (35, 40 %)",
        ("judge-a-err5", "judge-b-err35", "judge-c-err40"),
    ),
    ("one family at 20 %, errors shared", ("family-f-1-err20", "family-f-2-err20", "family-f-3-err20")),
    (
        "one family at 20 %, half shared (error correlation 0.25)",
        ("family-g-1-shared50-err20", "family-g-2-shared50-err20", "family-g-3-shared50-err20"),
    ),
    (
        "an independent 10 % judge and two of one family at 20 %",
        ("judge-a-err10", "family-h-1-err20", "family-h-2-err20"),
    ),
)


@dataclass(frozen=True)
class Line:
    name: str  # a member's model name, or a rule
    error: float  # share of criteria whose verdict is not the truth
    theory: float | None
    verdicts: tuple[Verdict, ...]


@dataclass(frozen=True)
class Scenario:
    title: str
    members: tuple[Line, ...]
    rules: tuple[Line, ...]
    agreement: float | None
    fleiss_kappa: float | None
    truth: tuple[bool, ...]

    def line(self, name: str) -> Line:
        return next(line for line in (*self.members, *self.rules) if line.name == name)


def simulate(
    models: Sequence[str], criteria: int, calibration_rows: int, met_rate: float, title: str = ""
) -> Scenario:
    """Every member's and every rule's error rate on ``criteria`` prompts (calibrated on others)."""
    prompts = [f"Simulated criterion {i}: criteria_met?" for i in range(criteria)]
    meta_prompts = [f"Simulated meta-eval row {i}: criteria_met?" for i in range(calibration_rows)]
    rows = [MetaRow(CATEGORY, (fake_verdict(p, met_rate),), ("physician",)) for p in meta_prompts]
    calibration = calibration_from_meta(
        rows, {m: [Verdict.of(fake_judge_verdict(p, m, met_rate)) for p in meta_prompts] for m in models}
    )
    truth = tuple(fake_verdict(p, met_rate) for p in prompts)
    verdicts = {m: tuple(Verdict.of(fake_judge_verdict(p, m, met_rate)) for p in prompts) for m in models}
    panel = list(zip(*verdicts.values(), strict=True))
    members = tuple(Line(m, _error(v, truth), _member_theory(m), v) for m, v in verdicts.items())
    rules = []
    for rule in PANEL_RULES:
        combined = tuple(
            combine(v, rule, labels=list(models), calibration=calibration, category=CATEGORY) for v in panel
        )
        rules.append(Line(rule, _error(combined, truth), panel_theory(models, rule, met_rate), combined))
    return Scenario(title, members, tuple(rules), agreement(panel), fleiss_kappa(panel), truth)


def _member_theory(model: str) -> float:
    errors = judge_errors(model)
    return 0.0 if errors is None else errors.rate


def _error(verdicts: Sequence[Verdict], truth: Sequence[bool]) -> float:
    return sum(v.criteria_met != t for v, t in zip(verdicts, truth, strict=True)) / len(truth)


def wrong_count_distribution(rates: Sequence[float]) -> list[float]:
    """P(k members err), k = 0..n, for independent members with these error rates."""
    dist = [1.0]
    for p in rates:
        dist = [
            (dist[k] if k < len(dist) else 0.0) * (1 - p) + (dist[k - 1] * p if k else 0.0)
            for k in range(len(dist) + 1)
        ]
    return dist


def panel_theory(models: Sequence[str], rule: str, met_rate: float) -> float | None:
    """The rule's error rate when members err independently given their family's event (one family
    of equal rates at most); None for the calibrated rule (it depends on the measured rates)."""
    if rule == "calibrated":
        return None
    errors = [judge_errors(m) for m in models]
    families = {e.family for e in errors if e is not None and e.family is not None}
    family_rates = {e.rate for e in errors if e is not None and e.family is not None}
    if len(families) > 1 or len(family_rates) > 1:
        return None
    p_family = family_rates.pop() if family_rates else 0.0
    total = 0.0
    for family_errs, weight in ((True, p_family), (False, 1 - p_family)):
        if weight == 0:
            continue
        rates = []
        for e in errors:
            rate = 0.0 if e is None else e.rate
            if e is not None and e.family is not None:  # the family's draw with probability `shared`
                rate = e.shared * family_errs + (1 - e.shared) * rate
            rates.append(rate)
        dist = wrong_count_distribution(rates)
        n = len(rates)
        if rule == "majority":
            if n % 2 == 0:
                return None  # ties go to the chair: not a function of the count alone
            error = sum(dist[k] for k in range(n // 2 + 1, n + 1))
        else:  # unanimous errs on a met truth when some member errs, on a not-met one when all do
            some, every = 1 - dist[0], dist[n]
            error = met_rate * some + (1 - met_rate) * every
            if rule == "any":
                error = met_rate * every + (1 - met_rate) * some
        total += weight * error
    return total


HEADER = (
    "| panel | members | majority (theory) | unanimous (theory) | any (theory) | calibrated "
    "| agreement | Fleiss κ |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
)


def table_row(scenario: Scenario) -> str:
    """One line of the summary table: every figure an error rate against the truth."""
    members = " · ".join(f"`{m.name}` {m.error:.4f}" for m in scenario.members)
    cells = []
    for line in scenario.rules:
        theory = "" if line.theory is None else f" ({line.theory:.4f})"
        cells.append(f"{line.error:.4f}{theory}")
    kappa = "undefined" if scenario.fleiss_kappa is None else f"{scenario.fleiss_kappa:.3f}"
    return f"| {scenario.title} | {members} | {' | '.join(cells)} | {scenario.agreement:.3f} | {kappa} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--criteria", type=int, default=20_000)
    parser.add_argument("--calibration-rows", type=int, default=5_000)
    parser.add_argument("--met-rate", type=float, default=0.5)
    args = parser.parse_args(argv)
    print(f"{args.criteria} criteria, calibrated on {args.calibration_rows} meta-eval rows", end=", ")
    print(f"met rate {args.met_rate}\n")
    print("\n".join(HEADER))
    for title, models in SCENARIOS:
        print(table_row(simulate(models, args.criteria, args.calibration_rows, args.met_rate, title)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
