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
  with it take their tickets before it goes on, in a replay as in the first run.

So a gather over children's results or over steps works, and is replayed in the same
order; its calls do not overlap (children run in parallel; steps in a gather run one
after another: for parallel work, start child workflows). The positions are a function
of the code as long as it awaits only durable calls and tasks made of them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


class CallOrder:
    """The tickets of one run's async calls: who runs now, who waits, in which order.
    ``unwind``: the exception that ends the run early; the calls waiting then raise it."""

    def __init__(self, unwind: type[BaseException]) -> None:
        self._unwind = unwind
        self._holder: asyncio.Future[None] | None = None  # the call running now
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._ended = False  # the workflow returned (or the run unwinds): no more calls
        self._idle: asyncio.Future[None] | None = None  # end() waits for the holder

    async def call(self, body: Callable[[], Awaitable[T]]) -> T:
        """Await ``body()`` when the calls that began before this one are done. The ticket
        is taken on entry (in the coroutine's first step); the next call goes on at the
        exit. A call that never let the loop run yields to it once before it returns (or
        raises), as one that did I/O would have: a replay takes the first run's order."""
        ticket = self._take()
        moved = _Moved(asyncio.get_running_loop())
        try:
            await ticket
            try:
                return await body()
            finally:
                if not moved.yet:
                    await asyncio.sleep(0)
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

    def _take(self) -> asyncio.Future[None]:
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._ended:
            ticket.cancel()
        elif self._holder is None and not self._waiting:
            self._holder = ticket
            ticket.set_result(None)
        else:
            self._waiting.append(ticket)
        return ticket

    def _leave(self, ticket: asyncio.Future[None]) -> None:
        if ticket is not self._holder:  # cancelled while it waited (e.g. asyncio.wait_for)
            if ticket in self._waiting:
                self._waiting.remove(ticket)
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


class _Moved:
    """Whether the event loop has run since this was made (the task then yielded)."""

    __slots__ = ("yet",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.yet = False
        loop.call_soon(self._moved)

    def _moved(self) -> None:
        self.yet = True
