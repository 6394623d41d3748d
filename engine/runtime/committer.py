"""Group commit: the commits of every execution that is ready at once go in one request.

Each activation hands its commit to :meth:`Committer.commit` and waits; the committer
sends every commit waiting when a request can go as one statement
(:meth:`~raftflow.stores.store.AsyncStore.commit`): N executions advancing together
cost one Raft entry, not N. ``max_inflight`` requests may be in flight at once (1 by
default: rqlite is CPU-bound, and more requests only split the batches; see
``docs/performance.md``, "What bounds the numbers"). An execution has at most one commit
waiting at a time, so concurrent requests never reorder an execution's commits.

A commit from the only execution the worker is running goes at once, from its own task,
when no request is in flight: nothing could join its batch, and the hand-offs to and from
the committer's task would cost three turns of the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from raftflow.stores.commit import Commit, CommitOutcome

if TYPE_CHECKING:
    from raftflow.engine.runtime.hooks import HookChain
    from raftflow.engine.runtime.worker import WorkerOptions, WorkerStats
    from raftflow.stores.contract import AsyncStore

Waiting = tuple[Commit, "asyncio.Future[CommitOutcome]"]


class Committer:
    """Batches commits on the worker's loop; :meth:`run` is its task."""

    def __init__(
        self,
        store: AsyncStore,
        options: WorkerOptions,
        stats: WorkerStats,
        hooks: HookChain | None = None,
        alone: Callable[[], bool] = lambda: False,
    ) -> None:
        self._store = store
        self._alone = alone
        self._hooks = hooks
        self._options = options
        self._stats = stats
        self._waiting: list[Waiting] = []
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(options.max_inflight)
        self._flushes: dict[asyncio.Task[None], None] = {}  # ordered: cancelled in order

    async def commit(self, commit: Commit) -> CommitOutcome:
        """Send ``commit`` with the next batch; its outcome, or the request's exception."""
        future: asyncio.Future[CommitOutcome] = asyncio.get_running_loop().create_future()
        if not self._waiting and not self._slots.locked() and self._alone():
            await self._slots.acquire()  # free: taken without yielding to the loop
            await self._flush(((commit, future),))
            return future.result()
        self._waiting.append((commit, future))
        self._wake.set()
        return await future

    async def run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._waiting:
                    await self._slots.acquire()
                    batch = self._waiting[: self._options.max_batch]
                    del self._waiting[: len(batch)]
                    if not batch:
                        self._slots.release()
                        break
                    task = asyncio.create_task(self._flush(batch))
                    self._flushes[task] = None
                    task.add_done_callback(self._flush_done)
        finally:
            for task in list(self._flushes):
                task.cancel()

    def _flush_done(self, task: asyncio.Task[None]) -> None:
        self._flushes.pop(task, None)

    async def _flush(self, batch: Sequence[Waiting]) -> None:
        started, applied, error = time.perf_counter(), 0, None
        try:
            commits = [c for c, _ in batch]
            outcomes = await self._store.commit(commits, self._options.visibility)
            self._stats.commit_requests += 1
        except Exception as exc:  # every waiter gets it: each hands its execution back
            error = exc
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
        else:
            for (_, future), outcome in zip(batch, outcomes):
                applied += outcome.applied
                if not future.done():
                    future.set_result(outcome)
        finally:
            # After the outcomes: the executions they wake are scheduled before the next
            # batch is taken, so their next commits join it (a release first would send
            # the next batch without them).
            self._slots.release()
            if self._hooks is not None:
                duration = time.perf_counter() - started
                self._hooks.after_commit_batch(
                    size=len(batch), applied=applied, duration=duration, error=error
                )
