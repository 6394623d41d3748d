"""An async workflow's concurrent durable calls: one at a time, in the order they began.

Each call of a workflow is recorded at its position, and a replay must meet the calls in
the same order. In an async workflow, coroutines can run concurrently -- the fan-in of
``await asyncio.gather(*(h.result_async() for h in children))``, or a gather over steps
-- and their calls would take positions in whatever order their I/O happened to finish,
and share the run's one staged record and one suspended turn (a gather over children's
results hung for ever). Here:

- a call takes a ticket when its coroutine starts (``asyncio.gather`` starts its
  awaitables in argument order, all in one pass of the event loop);
- the calls run one after another in ticket order, each to its end (its position, its
  I/O, its record); a coroutine that goes on after its call does so in the same step of
  the loop, so the ticket of its next call is taken before any other call can end;
- a call that never let the loop run (its result was recorded: a replay) yields to it
  once before it returns, as the first run's I/O did, so that the coroutines started
  with it take their tickets before it goes on, in a replay as in the first run. Only a task
  created and not yet started can take a ticket in that yield (the others wait for
  theirs, or for this call's end): with none on the loop -- a replay of a sequential
  workflow -- the yield changes nothing and is skipped, so a replay costs no loop pass
  per call. Whether a call let the loop run is seen on its own coroutine (did it ever
  yield?): a call costs the loop no callback of its own.

So a gather over children's results or over steps works, and is replayed in the same
order; its calls do not overlap (children run in parallel; steps in a gather run one
after another: for parallel work, start child workflows). The positions are a function
of the code as long as it awaits only durable calls and tasks made of them.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections import deque
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class CallOrder:
    """The tickets of one run's async calls: who runs now, who waits, in which order.
    ``unwind``: the exception that ends the run early; the calls waiting then raise it."""

    def __init__(
        self, unwind: type[BaseException], ours: Callable[[contextvars.Context], bool]
    ) -> None:
        self._unwind = unwind
        self._ours = ours  # whether a task's context is this run's (its code made the task)
        self._holder: object | None = None  # the ticket of the call running now
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._ended = False  # the workflow returned (or the run unwinds): no more calls
        self._idle: asyncio.Future[None] | None = None  # end() waits for the holder

    async def call(self, body: Callable[[], Awaitable[T]]) -> T:
        """Await ``body()`` when the calls that began before this one are done. The ticket
        is taken on entry (in the coroutine's first step); the next call goes on at the
        exit. A call that never let the loop run yields to it once before it returns (or
        raises), as one that did I/O would have: a replay takes the first run's order."""
        ticket = self._take()
        try:
            if ticket is not _ALONE_TAKEN:
                await ticket  # type: ignore[misc]  # a future: done when this call's turn comes
            watched = _Watched(body())
            try:
                result = await watched
            except self._unwind:
                raise  # the run ends here: no later position to keep in order
            except BaseException:
                if not watched.yielded and self._a_task_of_ours_waits_to_start():
                    await asyncio.sleep(0)
                raise
            if not watched.yielded and self._a_task_of_ours_waits_to_start():
                await asyncio.sleep(0)
            return result
        except self._unwind:
            self._stop(self._unwind)  # the run is over here: the calls waiting unwind with it
            raise
        finally:
            self._leave(ticket)

    async def end(self) -> None:
        """The workflow function returned: calls that have not begun never will (their
        coroutines are cancelled: nothing awaits them); the one under way ends first, so
        the outcome's commit follows its record."""
        self._stop(None)
        if self._holder is not None:
            self._idle = asyncio.get_running_loop().create_future()
            await self._idle

    def _a_task_of_ours_waits_to_start(self) -> bool:
        """Whether a task this run's code made has not run yet. Its first step is among
        the loop's ready callbacks, run in the task's context (asyncio's loops:
        ``_ready``, each task step's callback bound to its task); on another loop, any
        task not started yet counts."""
        loop = asyncio.get_running_loop()
        ready = getattr(loop, "_ready", None)
        if ready is None:
            return any(_unstarted(task) for task in asyncio.all_tasks(loop))
        for handle in ready:
            task = getattr(getattr(handle, "_callback", None), "__self__", None)
            if isinstance(task, asyncio.Task) and _unstarted(task):
                context = getattr(handle, "_context", None)
                if context is None or self._ours(context):
                    return True
        return False

    def _take(self) -> object:
        """``_ALONE_TAKEN`` (the call holds the turn at once: no future to make), or the
        future that is done when the call's turn comes."""
        if self._holder is None and not self._waiting and not self._ended:
            self._holder = _ALONE_TAKEN
            return _ALONE_TAKEN
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._ended:
            ticket.cancel()
        else:
            self._waiting.append(ticket)
        return ticket

    def _leave(self, ticket: object) -> None:
        if ticket is not self._holder:  # cancelled while it waited (e.g. asyncio.wait_for)
            if ticket in self._waiting:
                self._waiting.remove(ticket)  # type: ignore[arg-type]
            return
        self._holder = None
        while self._waiting:
            following = self._waiting.popleft()
            if not following.done():
                self._holder = following
                following.set_result(None)
                return
        if self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def _stop(self, error: type[BaseException] | None) -> None:
        self._ended = True
        while self._waiting:
            ticket = self._waiting.popleft()
            if ticket.done():
                continue
            if error is None:
                ticket.cancel()
            else:
                ticket.set_exception(error())


#: The ticket of a call that found no call under way or waiting: it holds the turn at
#: once. One object serves every such call: only one call holds the turn at a time.
_ALONE_TAKEN = object()


class _Watched(Generic[T]):
    """Awaits an awaitable and notes whether it ever yielded to the loop (then the loop
    ran, and the coroutines started with the call took their tickets). The values it
    yields and the ones the task sends or throws back pass through unchanged."""

    __slots__ = ("_inner", "yielded")

    def __init__(self, awaitable: Awaitable[T]) -> None:
        self._inner = awaitable.__await__()
        self.yielded = False

    def __await__(self) -> Generator[Any, Any, T]:
        inner = self._inner
        try:
            pending = inner.send(None)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        self.yielded = True
        while True:
            try:
                reply = yield pending
            except GeneratorExit:
                inner.close()
                raise
            except BaseException as exc:  # thrown in by the task (a cancel): pass it on
                try:
                    pending = inner.throw(exc)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]
            else:
                try:
                    pending = inner.send(reply)
                except StopIteration as stop:
                    return stop.value  # type: ignore[no-any-return]


def _unstarted(task: asyncio.Task[Any]) -> bool:
    coro = task.get_coro()
    return inspect.iscoroutine(coro) and inspect.getcoroutinestate(coro) == inspect.CORO_CREATED
