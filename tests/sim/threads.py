"""Real threads in the simulation, run in lockstep with its loop: sync workflows and steps.

The engine runs a sync workflow in a thread of its worker's pool, a sync step in that
thread (or, in an async workflow, through ``asyncio.to_thread``; with a timeout, in a
thread of its own), and ``Engine.start`` in the caller's thread. Real threads run at
moments the OS picks, which no seed decides. Here they are real threads that run **one
at a time with the loop**: the loop hands a thread the baton and waits until the thread
gives it back -- when it waits for the loop (a commit, a request, a sleep on simulated
time, its next turn) or ends. So a sync workflow's code runs exactly where the engine's
code would let another thread run, at points the seed decides, and a run stays a pure
function of its seed.

What a thread of the engine waits on is swapped for a lockstep version for the duration
of a simulation (:meth:`Lockstep.installed`): the worker's pool and the pool of sync steps
with a timeout, ``Activation.wait`` (a coroutine run on the loop), the event a suspended
run waits on, ``time.sleep`` of a short wait in place, and the loop's ``run_in_executor``.
A thread that blocks on anything else holds the baton: the loop gives up after
:data:`STUCK_AFTER` real seconds and says where the thread stands.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator
from typing import Any

from raftflow.engine.runtime import run as run_module
from raftflow.engine.workflow import activation as activation_module
from raftflow.engine.workflow import drivers as drivers_module

#: Real seconds a thread may run without giving the baton back (it blocked elsewhere).
STUCK_AFTER = 30.0


class ThreadExit(BaseException):
    """Raised in a thread still waiting when the simulation ends: it unwinds and exits."""


class SimThread:
    """One real thread that runs only while it holds the baton."""

    def __init__(self, lockstep: Lockstep, fn: Callable[[], Any], name: str) -> None:
        self.lockstep = lockstep
        self.fn = fn
        self.go = threading.Semaphore(0)  # the loop hands the baton over
        self.back = threading.Semaphore(0)  # ... and the thread gives it back
        self.done = False
        self.abort = False
        self.waiting = 0  # which park the thread is in (a wake-up for an older one is stale)
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        self.lockstep._current.thread = self
        self.go.acquire()
        try:
            if self.abort:
                return
            self.fn()
        except ThreadExit:
            pass
        except BaseException as exc:  # a bug: the loop's handler makes it a violation
            self.lockstep.report(f"thread {self.thread.name} failed", exc)
        finally:
            self.done = True
            self.back.release()

    def park(self) -> None:
        """In the thread: give the baton back until :meth:`Lockstep.resume` hands it over."""
        self.back.release()
        self.go.acquire()
        if self.abort:
            raise ThreadExit()


class Lockstep:
    """The threads of one simulation, and the loop they take turns with."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.threads: list[SimThread] = []
        self._current = threading.local()

    # -- on the loop ----------------------------------------------------------------------

    def spawn(self, fn: Callable[[], Any], name: str) -> SimThread:
        """A thread running ``fn``, first handed the baton by a callback of the loop."""
        thread = SimThread(self, fn, f"sim-{name}-{len(self.threads)}")
        self.threads.append(thread)
        thread.thread.start()
        self.loop.call_soon(self._hand_over, thread, 0)
        return thread

    def _hand_over(self, thread: SimThread, waiting: int) -> None:
        if thread.done or thread.waiting != waiting:
            return  # ended, or woken already: a stale wake-up
        thread.waiting += 1
        thread.go.release()
        if not thread.back.acquire(timeout=STUCK_AFTER):
            frame = sys._current_frames().get(thread.thread.ident or 0)
            where = "".join(traceback.format_stack(frame)) if frame is not None else "?"
            raise RuntimeError(f"{thread.thread.name} blocked outside the lockstep:\n{where}")

    def resume(self, thread: SimThread) -> None:
        """Wake ``thread`` at a later turn of the loop (called on the loop, or by a thread
        holding the baton: the loop is blocked then)."""
        self.loop.call_soon(self._hand_over, thread, thread.waiting)

    def close(self) -> None:
        """Make every thread still waiting exit (in creation order): ``ThreadExit`` at its
        wait, its ``finally`` blocks run."""
        for thread in self.threads:
            for _ in range(10):  # its unwinding may wait again
                if thread.done:
                    break
                thread.abort = True
                thread.waiting += 1
                thread.go.release()
                thread.back.acquire(timeout=STUCK_AFTER)
            thread.thread.join(STUCK_AFTER)
        self.threads.clear()

    # -- in a thread ----------------------------------------------------------------------

    def me(self) -> SimThread | None:
        """The simulated thread running this code (None on the loop)."""
        thread: SimThread | None = getattr(self._current, "thread", None)
        return thread

    def result(self, future: concurrent.futures.Future[Any], timeout: float | None = None) -> Any:
        """``future.result(timeout)`` in a thread, ``timeout`` on simulated time."""
        me = self.me()
        if me is None:
            raise RuntimeError("a blocking wait on the loop's thread")
        if not future.done():
            waiting = me.waiting
            timer = None
            if timeout is not None:
                timer = self.loop.call_later(timeout, self._hand_over, me, waiting)
            future.add_done_callback(
                lambda _: self.loop.call_soon_threadsafe(self._hand_over, me, waiting)
            )
            me.park()
            if timer is not None:
                timer.cancel()
            if not future.done():
                raise concurrent.futures.TimeoutError()
        return concurrent.futures.Future.result(future)  # done: the base class's, no wait

    def run(self, coroutine: Any) -> Any:
        """Run ``coroutine`` on the loop from a thread and wait for it."""
        return self.result(asyncio.run_coroutine_threadsafe(coroutine, self.loop))

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` on simulated time."""
        self.run(asyncio.sleep(seconds))

    def report(self, what: str, exc: BaseException) -> None:
        """An exception that ended a thread: to the loop's handler (a violation)."""
        self.loop.call_soon_threadsafe(
            self.loop.call_exception_handler, {"message": what, "exception": exc}
        )

    # -- what the engine's threads wait on, swapped ----------------------------------------

    def submit_thread(self, fn: Callable[..., Any], *args: Any, name: str) -> SimFuture:
        """``fn(*args)`` in a new thread; its outcome in the future returned."""
        future = SimFuture(self)

        def target() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args))
            except ThreadExit:
                future.cancel()
                raise
            except BaseException as exc:
                future.set_exception(exc)

        self.spawn(target, name)
        return future

    @contextlib.contextmanager
    def installed(self, process: contextvars.ContextVar[str]) -> Iterator[None]:
        """Swap what the engine's threads wait on, for one simulation (``process``: the
        variable naming the simulated process code runs in, carried into its threads)."""
        lockstep = self

        class Pool:
            """The worker's pool (``ThreadPoolExecutor``): a lockstep thread per run, in a
            context of its own that says which simulated process it belongs to."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                pass

            def submit(self, fn: Callable[..., Any], *args: Any) -> SimFuture:
                context = contextvars.Context()
                context.run(process.set, process.get())
                return lockstep.submit_thread(context.run, fn, *args, name="workflow")

            def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
                pass

        class Event:
            """``threading.Event`` for a suspended sync run: set on the loop, waited on in
            the run's thread."""

            def __init__(self) -> None:
                self.flag = False
                self.waiter: SimThread | None = None

            def is_set(self) -> bool:
                return self.flag

            def set(self) -> None:
                self.flag = True
                if self.waiter is not None:
                    waiter, self.waiter = self.waiter, None
                    lockstep.resume(waiter)

            def clear(self) -> None:
                self.flag = False

            def wait(self, timeout: float | None = None) -> bool:
                me = lockstep.me()
                assert me is not None and timeout is None, "a suspended run waits in a thread"
                while not self.flag:
                    self.waiter = me
                    me.park()
                return True

        def wait(run: Any, coroutine: Any) -> Any:
            return lockstep.run(coroutine)

        def run_in_executor(executor: Any, func: Callable[..., Any], *args: Any) -> Any:
            future = lockstep.submit_thread(func, *args, name="to_thread")
            return asyncio.wrap_future(future, loop=lockstep.loop)

        overrun = types.SimpleNamespace(
            submit=lambda fn, *args: lockstep.submit_thread(fn, *args, name="overrun")
        )
        clock = types.SimpleNamespace(**{**vars(time), "sleep": lockstep.sleep})
        threading_ = types.SimpleNamespace(**{**vars(threading), "Event": Event})
        saved = [
            (run_module, "ThreadPoolExecutor", Pool),
            (activation_module, "threading", threading_),
            (activation_module.Activation, "wait", wait),
            (drivers_module, "time", clock),
            (drivers_module, "_OVERRUN", overrun),
            (self.loop, "run_in_executor", run_in_executor),
        ]
        originals = [(owner, name, getattr(owner, name)) for owner, name, _ in saved]
        for owner, name, value in saved:
            setattr(owner, name, value)
        try:
            yield
        finally:
            for owner, name, value in originals:
                setattr(owner, name, value)


class SimFuture(concurrent.futures.Future[Any]):
    """A lockstep thread's outcome: ``result(timeout)`` waits on simulated time."""

    def __init__(self, lockstep: Lockstep) -> None:
        super().__init__()
        self.lockstep = lockstep

    def result(self, timeout: float | None = None) -> Any:
        if self.done() or self.lockstep.me() is None:  # on the loop: never waits
            return super().result(None if self.done() else 0)
        return self.lockstep.result(self, timeout)
