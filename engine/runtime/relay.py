"""The relay: a worker run's duty of delivering its cluster's outbox to the other clusters.

A sharded deployment's clusters tell each other what crosses them -- a child that finished
for its parent elsewhere, a cancel for a child elsewhere (:mod:`raftflow.stores.outbox`).
The rows are written by the transaction that makes the news; the relay applies each on
the cluster of its target (idempotent: a row applied twice changes nothing the second
time) and then deletes it. Every worker of a cluster relays, so news waits for no
particular worker: one killed between applying a row and deleting it leaves the row to
be applied again, harmlessly.

The relay reads the outbox (a ``weak`` read: no Raft entry) when its run commits news --
the outcome of an execution whose parent is elsewhere, or any cancel -- and every
:data:`RELAY_INTERVAL` seconds (:data:`UNSHARDED_INTERVAL` on one cluster, where the only
news is for a parent gone before its child, which is dropped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from raftflow.stores import outbox
from raftflow.stores.outbox import RELAY_BATCH, Notice

from raftflow.errors import ExecutionNotFoundError

if TYPE_CHECKING:
    from raftflow.engine.runtime.duties import WorkerView
    from raftflow.stores.contract import AsyncStore

log = logging.getLogger("raftflow.worker")

#: Seconds between two reads of the outbox with no news committed (sharded).
RELAY_INTERVAL = 5.0
UNSHARDED_INTERVAL = 30.0
#: The least time between two reads, however much news is committed.
RELAY_PAUSE = 0.05


class Relay:
    """Delivers one cluster's outbox (a :class:`~raftflow.engine.runtime.duties.Duty`)."""

    name = "raftflow-relay"

    def __init__(
        self,
        worker: WorkerView,
        store: AsyncStore,
        elsewhere: Callable[[str], AsyncStore | None],
        interval: float,
    ) -> None:
        self.worker = worker
        self.store = store
        self.elsewhere = elsewhere
        self.interval = interval
        self._news = asyncio.Event()
        self.relayed = 0

    def news(self) -> None:
        """Committed news (on the loop): relay now rather than at the next interval."""
        self._news.set()

    async def run(self) -> None:
        while True:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._news.wait(), self.interval)
            self._news.clear()
            try:
                await self.relay()
            except Exception as exc:  # the network, a cluster without leader: next time
                log.warning("worker %s: relaying the outbox failed: %s", self.worker.worker_id, exc)
            await asyncio.sleep(RELAY_PAUSE)

    async def relay(self) -> int:
        """Deliver what the outbox holds now; how many rows were delivered."""
        done = 0
        while True:
            notices = await self.store.run(outbox.pending())
            for notice in notices:
                await self._deliver(notice)
                await self.store.run(outbox.delivered(notice))
                done += 1
            self.relayed += len(notices)
            if len(notices) < RELAY_BATCH:
                return done

    async def _deliver(self, notice: Notice) -> None:
        target = self.elsewhere(notice.target) or self.store
        if notice.kind == "child_finished":
            await target.run(outbox.child_finished(target.clock, notice))
        elif notice.kind == "cancel":
            reason = "its parent was cancelled"
            try:
                await target.run(target.flows.cancel(notice.target, reason))
            except ExecutionNotFoundError:  # noted, not started there: its start may come
                workflow = await self.store.run(outbox.child_workflow(notice.source, notice.target))
                if workflow is not None:
                    flow = outbox.cancelled_before_start(target.clock, notice, workflow, reason)
                    await target.run(flow)
                    # A start that arrived meanwhile is there instead: cancel it too.
                    await target.run(target.flows.cancel(notice.target, reason))
        else:
            log.error("outbox row %d of unknown kind %r dropped", notice.seq, notice.kind)

    async def leave(self) -> None:
        return None
