"""`gc_paused` turns the cyclic collector off inside the block and restores its previous state."""

from __future__ import annotations

import gc

import pytest

from healthbench.gc_paused import gc_paused


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
