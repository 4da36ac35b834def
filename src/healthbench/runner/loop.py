"""Running the engine's coroutine: on uvloop when it is installed (it is a dependency on Linux and
macOS), which roughly halves the event loop's CPU cost per model call.

SIGTERM ends a run as Ctrl-C does: the running coroutine is cancelled (so the run is recorded as
interrupted and everything finished is kept), then `Terminated` is raised to the caller."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from healthbench.errors import Terminated

T = TypeVar("T")


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _cancelled_on_sigterm(coro: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    terminated = False

    def terminate() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    try:  # only the main thread of the main interpreter may handle signals
        loop.add_signal_handler(signal.SIGTERM, terminate)
        handled = True
    except (NotImplementedError, RuntimeError, ValueError):
        handled = False
    try:
        return await coro
    except asyncio.CancelledError:
        if terminated:
            raise Terminated() from None
        raise
    finally:
        if handled:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signal.SIGTERM)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(_cancelled_on_sigterm(coro))
