"""A sync run's hand-off to the worker's loop (engine/workflow/handoff.py) has the outcome
of ``asyncio.run_coroutine_threadsafe(...).result()``, which it replaces: each case runs
through both, on a loop in another thread, and must end the same way."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from raftflow.engine.workflow.handoff import run_on_loop

from tests.support import LoopThread

Wait = Callable[[Coroutine[Any, Any, Any], asyncio.AbstractEventLoop], Any]


def _threadsafe(coroutine: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> Any:
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


WAYS = [pytest.param(run_on_loop, id="run_on_loop"), pytest.param(_threadsafe, id="threadsafe")]
CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="unset")


@pytest.fixture
def loop(loop_thread: LoopThread) -> asyncio.AbstractEventLoop:
    return loop_thread.loop


@pytest.mark.parametrize("wait", WAYS)
def test_the_value_and_the_thread_s_context(wait: Wait, loop: asyncio.AbstractEventLoop) -> None:
    async def read() -> tuple[str, bool]:
        await asyncio.sleep(0)
        return CURRENT.get(), asyncio.get_running_loop() is loop

    token = CURRENT.set("in the thread")
    try:
        assert wait(read(), loop) == ("in the thread", True)
    finally:
        CURRENT.reset(token)


@pytest.mark.parametrize("wait", WAYS)
def test_an_exception_is_raised_as_it_was(wait: Wait, loop: asyncio.AbstractEventLoop) -> None:
    error = KeyError("gone")

    async def fail() -> None:
        await asyncio.sleep(0)
        raise error

    with pytest.raises(KeyError) as raised:
        wait(fail(), loop)
    assert raised.value is error


@pytest.mark.parametrize("wait", WAYS)
def test_asyncio_s_timeout_is_concurrent_futures(
    wait: Wait, loop: asyncio.AbstractEventLoop
) -> None:
    async def late() -> None:
        await asyncio.wait_for(asyncio.sleep(10), 0.01)

    with pytest.raises(concurrent.futures.TimeoutError):
        wait(late(), loop)


@pytest.mark.parametrize("wait", WAYS)
def test_a_cancelled_task_is_a_concurrent_cancel(
    wait: Wait, loop: asyncio.AbstractEventLoop
) -> None:
    async def cancelled() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop.call_soon(task.cancel)
        await asyncio.sleep(10)

    with pytest.raises(concurrent.futures.CancelledError) as raised:
        wait(cancelled(), loop)
    assert type(raised.value) is concurrent.futures.CancelledError  # an Exception, not asyncio's
