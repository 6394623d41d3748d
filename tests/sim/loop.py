"""A deterministic asyncio event loop on simulated time.

The loop is asyncio's own (every callback, task switch and timer is real asyncio), with two
changes: ``time()`` is a number the simulation owns, and waiting for I/O never blocks --
the selector jumps the clock straight to the next timer. No sockets, no threads: a run is
a pure function of its seed, and a minute of simulated time takes milliseconds.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Mapping
from typing import Any


class Deadlock(RuntimeError):
    """Nothing is ready and no timer is scheduled: the simulation can never move again."""


class _Selector(selectors.BaseSelector):
    """A selector with no I/O: ``select(timeout)`` advances the simulated clock."""

    def __init__(self) -> None:
        self.now = 0.0
        self._keys: dict[int, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._keys.pop(fd)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Deadlock("no task is ready and no timer is set")
        if timeout > 0:
            self.now += timeout
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


class SimLoop(asyncio.SelectorEventLoop):
    """asyncio's loop on simulated time (starts at 0.0 and never waits for real).

    Nothing that fails in it goes unseen: an exception raised in a callback is kept as it
    happens, and one that ends a task and that nobody retrieved is kept once the run is
    over (:meth:`unexpected`) -- asyncio would only log it when the task is collected, at
    a moment that depends on the garbage collector, not on the seed.
    """

    def __init__(self) -> None:
        self._sim = _Selector()
        super().__init__(self._sim)
        self._clock_resolution = 1e-9
        self.created = 0
        self._errors: list[str] = []
        self._failed: list[asyncio.Task[Any]] = []
        # Every task not done, held: a killed process's tasks wait for ever on requests
        # that never complete, and asyncio keeps only weak references to tasks -- collected
        # mid-run ("Task was destroyed but it is pending!") at a moment set by the garbage
        # collector, which depends on the seeds run before in the same process.
        self._pending: set[asyncio.Task[Any]] = set()
        self.set_exception_handler(self._keep_error)

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        """A task numbered in creation order (``sim_order``): ``asyncio.all_tasks`` is a set
        ordered by memory addresses, so whatever walks it sorts by this first."""
        task = super().create_task(coro, **kwargs)
        self.created += 1
        task.sim_order = self.created  # type: ignore[attr-defined]
        self._pending.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._pending.discard(task)
        # Not task.exception(): that would count as retrieving it.
        if not task.cancelled() and getattr(task, "_log_traceback", False):
            self._failed.append(task)

    def _keep_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        what = f"{type(error).__name__}: {error}" if error is not None else ""
        self._errors.append(f"{context.get('message', 'error')} {what}".strip())

    def unexpected(self, expected: tuple[type[BaseException], ...] = ()) -> list[str]:
        """What failed in the loop and was never handled: exceptions raised in callbacks,
        and tasks ended by an exception nobody retrieved (but ``expected`` ones: those the
        simulation raises on purpose). Each is reported once; the tasks count as seen."""
        found, self._errors = self._errors, []
        for task in self._failed:
            if not getattr(task, "_log_traceback", False):
                continue  # retrieved after it ended (awaited, gathered)
            error = task.exception()  # retrieved now: asyncio logs it no more
            if not isinstance(error, expected):
                name = getattr(task.get_coro(), "__qualname__", task.get_name())
                found.append(f"task {name} failed: {type(error).__name__}: {error}")
        self._failed = []
        return found

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The tasks not done yet, in creation order."""
        return sorted(asyncio.all_tasks(self), key=lambda t: getattr(t, "sim_order", 0))

    def time(self) -> float:
        return self._sim.now

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> Any:
        raise RuntimeError("a thread in the simulation: its timing would not be deterministic")
