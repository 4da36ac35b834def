"""The simulation of docs/panels.md (benchmarks/panel_simulation.py) holds its known results: judges of
known independent error rates from the fake server, panels against their members and against theory
(e.g. the majority of three independent 20 %-error judges errs 3p² − 2p³ = 10.4 %), and correlated
judges of one family where a panel does not help. Figures are within 4 binomial standard deviations
of theory (the fake's errors are hashes: the same every run); equalities are exact."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "panel_simulation.py"
CRITERIA, CALIBRATION_ROWS = 10_000, 2_000


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    spec = importlib.util.spec_from_file_location("panel_simulation", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["panel_simulation"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def close(observed: float, p: float, n: int = CRITERIA) -> bool:
    return abs(observed - p) <= 4 * math.sqrt(p * (1 - p) / n)


def run(sim: ModuleType, *models: str, met_rate: float = 0.5):  # type: ignore[no-untyped-def]
    return sim.simulate(models, CRITERIA, CALIBRATION_ROWS, met_rate)


def test_theory_by_hand(sim: ModuleType) -> None:
    p = 0.2
    three = ("judge-a-err20", "judge-b-err20", "judge-c-err20")
    assert sim.panel_theory(three, "majority", 0.5) == pytest.approx(3 * p**2 - 2 * p**3)
    five = tuple(f"judge-{c}-err20" for c in "abcde")
    assert sim.panel_theory(five, "majority", 0.5) == pytest.approx(
        10 * p**3 * (1 - p) ** 2 + 5 * p**4 * (1 - p) + p**5
    )
    # unanimous errs on a met truth when any member errs, on a not-met truth when all do
    assert sim.panel_theory(three, "unanimous", 0.3) == pytest.approx(0.3 * (1 - 0.8**3) + 0.7 * 0.2**3)
    assert sim.panel_theory(three, "any", 0.3) == pytest.approx(0.3 * 0.2**3 + 0.7 * (1 - 0.8**3))
    # a family sharing half its draws: given the family's error (p) each member errs with 0.5 + 0.5 p
    half = tuple(f"family-g-{i}-shared50-err20" for i in range(3))
    q1, q0 = 0.5 + 0.5 * p, 0.5 * p
    expected = p * (3 * q1**2 - 2 * q1**3) + (1 - p) * (3 * q0**2 - 2 * q0**3)
    assert sim.panel_theory(half, "majority", 0.5) == pytest.approx(expected)
    assert sim.panel_theory(three, "calibrated", 0.5) is None


def test_majority_of_independent_judges(sim: ModuleType) -> None:
    three = run(sim, "judge-a-err20", "judge-b-err20", "judge-c-err20")
    for member in three.members:
        assert close(member.error, 0.2)
    assert close(three.line("majority").error, 0.104)
    five = run(sim, *(f"judge-{c}-err20" for c in "abcde"))
    assert close(five.line("majority").error, 0.05792)
    for scenario in (three, five):
        for rule in ("unanimous", "any"):  # they trade one kind of error for the other: worse here
            line = scenario.line(rule)
            assert close(line.error, line.theory) and line.error > 0.2


def test_calibrated_follows_the_accurate_judge_where_majority_does_not(sim: ModuleType) -> None:
    scenario = run(sim, "judge-a-err5", "judge-b-err35", "judge-c-err40")
    accurate = scenario.line("judge-a-err5")
    assert scenario.line("calibrated").verdicts == accurate.verdicts
    majority = scenario.line("majority")
    assert close(
        majority.error, 0.05 * 0.35 * 0.6 + 0.05 * 0.4 * 0.65 + 0.35 * 0.4 * 0.95 + 0.05 * 0.35 * 0.4
    )
    assert majority.error > 3 * accurate.error  # the panel is much worse than its best member


def test_a_family_that_shares_its_errors_gains_nothing(sim: ModuleType) -> None:
    scenario = run(sim, "family-f-1-err20", "family-f-2-err20", "family-f-3-err20")
    one = scenario.members[0].verdicts
    for line in (*scenario.members, *scenario.rules):
        assert line.verdicts == one  # every rule says what each member says
    assert scenario.agreement == 1.0 and scenario.fleiss_kappa == 1.0
    half = run(sim, *(f"family-g-{i}-shared50-err20" for i in range(3)))
    assert close(half.line("majority").error, 0.152)  # between 10.4 % (independent) and 20 %


def test_a_family_outvotes_a_better_independent_judge(sim: ModuleType) -> None:
    scenario = run(sim, "judge-a-err10", "family-h-1-err20", "family-h-2-err20")
    family = scenario.line("family-h-1-err20")
    for rule in ("majority", "calibrated"):  # calibrated counts the family twice: it assumes independence
        assert scenario.line(rule).verdicts == family.verdicts
    assert scenario.line("majority").error > scenario.line("judge-a-err10").error + 0.05
