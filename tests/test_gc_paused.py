"""`gc_paused` (CLI only) turns the cyclic collector off inside the block and restores its previous
state; library code called from service threads never touches the collector."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from healthbench.cli.gc_paused import gc_paused
from healthbench.results.rescore import rescore_allresults
from healthbench.scoring.run_score import ScoringOptions


def test_collector_is_off_inside_and_back_on_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collector_is_restored_after_an_error() -> None:
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("with_samples", [False, True])
def test_a_service_side_rescore_leaves_the_collector_alone(
    fixtures_dir: Path, monkeypatch: pytest.MonkeyPatch, with_samples: bool
) -> None:
    """A job service's worker thread re-scores a file while another thread runs: the collector stays
    enabled throughout, and the library never calls gc.disable (only cli/ owns the process)."""
    disables: list[str] = []
    real_disable = gc.disable

    def spy_disable() -> None:
        disables.append(threading.current_thread().name)
        real_disable()

    monkeypatch.setattr(gc, "disable", spy_disable)
    seen_disabled = threading.Event()
    done = threading.Event()
    results: list[float | None] = []

    def worker() -> None:
        try:
            for _ in range(5):
                rescored = rescore_allresults(
                    fixtures_dir / "small_allresults.json",
                    data=[fixtures_dir / "small_dataset.jsonl"],
                    options=ScoringOptions(n_resamples=20),
                    with_samples=with_samples,
                )
                results.append(rescored.run_score.score)
        finally:
            done.set()

    thread = threading.Thread(target=worker, name="job-worker")
    thread.start()
    while not done.is_set():
        if not gc.isenabled():
            seen_disabled.set()
    thread.join()
    assert len(results) == 5 and results[0] is not None
    assert disables == [] and not seen_disabled.is_set() and gc.isenabled()
