"""A sync workflow's thread hands a coroutine to the worker's loop and waits for its end.

:func:`run_on_loop` is ``asyncio.run_coroutine_threadsafe(coroutine, loop).result()``
with the same outcome -- the value, the exception raised (asyncio's own converted to
:mod:`concurrent.futures`' as that future does), ``concurrent.futures.CancelledError``
for a cancelled task -- and less work on both sides: a sync run waits like this for every
commit, so the hand-off is on each step's path. The task's done callback releases a plain
lock the thread waits on, instead of a :class:`concurrent.futures.Future` (a condition
variable, its waiter lock, two chained callbacks) between them.
"""

from __future__ import annotations

import _thread
import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any

#: asyncio's exceptions that a concurrent future's result() raises as its own.
_CONVERTED: dict[type[BaseException], type[BaseException]] = {
    asyncio.TimeoutError: concurrent.futures.TimeoutError,
    asyncio.InvalidStateError: concurrent.futures.InvalidStateError,
}


def run_on_loop(coroutine: Coroutine[Any, Any, Any], loop: asyncio.AbstractEventLoop) -> Any:
    """Run ``coroutine`` as a task on ``loop`` (another thread's) and wait for its outcome."""
    done = _thread.allocate_lock()
    done.acquire()
    ended: list[asyncio.Future[Any] | BaseException] = []

    def release(task: asyncio.Future[Any] | BaseException) -> None:
        ended.append(task)
        done.release()

    def start() -> None:
        # In the context the thread had (call_soon_threadsafe copies it): the task's too.
        try:
            task = loop.create_task(coroutine)
        except BaseException as exc:
            release(exc)
            raise
        task.add_done_callback(release)

    loop.call_soon_threadsafe(start)
    _wait_released(done)
    (task,) = ended
    if isinstance(task, BaseException):
        raise task
    if task.cancelled():
        raise concurrent.futures.CancelledError()
    error = task.exception()
    if error is None:
        return task.result()
    converted = _CONVERTED.get(type(error))
    raise error if converted is None else converted(*error.args)


def _wait_released(done: _thread.LockType) -> None:
    """Block until the loop releases ``done`` (a function of its own: a profile of the
    thread shows it waiting here, not at work)."""
    done.acquire()
