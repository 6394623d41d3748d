"""Retention: finished executions are deleted once they are older than ``Engine(retention=)``.

An execution that succeeded, failed or was cancelled (and every archived run of
``continue_as_new``) whose end is older than the retention period (default 30 days) is
deleted with its steps, signals, events and any event left in its queue group. Executions
that have not finished are never touched, however old, nor a finished child whose parent
still runs (it may yet read the child's result): the family goes once the parent has.

One worker at a time does it: the *retention duty*, a lease carried by the presence beats
(:mod:`raftflow.engine.runtime.presence`), so N workers cost no more than one. The holder deletes
in small batches (``WorkerOptions(retention_batch=50)`` executions per request, one
transaction), paced so that the deletes take a small share of the cluster's time
(``retention_share=0.05``: after a batch whose request took t, a pause of 19 t), and
skips a batch while more than half of its slots run executions. When nothing is left to
delete it checks again at its next beat, with a ``weak`` read (no Raft entry).

Why so small and so slow: rqlite applies one entry at a time, so a claim that arrives
while a batch is applied waits for it (and the three replicas applying it take CPU from
everything else). Large batches, or deletes taking a large share of the time, make the
claims wait; small batches paced to a small share barely slow them, at the price of speed:
a large backlog takes a while to go (docs/performance.md, "Retention", has the figures;
``bench/retention.py`` measures them).

All workers should run with the same ``retention``: the duty's holder applies its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from raftflow.stores.retention import RetentionFlows

from raftflow.errors import ConfigurationError

if TYPE_CHECKING:
    from raftflow.engine.runtime.duties import WorkerView
    from raftflow.stores.contract import AsyncStore

log = logging.getLogger("raftflow.worker")

#: How long finished executions are kept by default.
DEFAULT_RETENTION = timedelta(days=30)
#: The duty (:mod:`raftflow.engine.runtime.presence`) whose holder deletes expired executions.
RETENTION_DUTY = "retention"


def check_retention(value: object) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ConfigurationError(
            f"retention must be a positive timedelta (or None: keep for ever), not {value!r}"
        )
    return value


class Retention:
    """The retention task of one worker's run: active while it holds the duty."""

    name = "raftflow-retention"

    def __init__(self, worker: WorkerView, store: AsyncStore, keep: timedelta) -> None:
        self.worker = worker
        self.store = store
        self.keep = keep.total_seconds()
        self.flows = RetentionFlows(store.clock)
        self.held = False  # set by the presence beat
        self.wake = asyncio.Event()
        self.deleted = 0
        self.took: list[float] = []  # how long each batch's request took (the last 1,000)

    def on_beat(self, held: bool) -> None:
        self.held = held
        if held:
            self.wake.set()

    def busy(self) -> bool:
        return self.worker.running() > self.worker.options.concurrency // 2

    def may_delete(self) -> bool:
        return self.held and not self.worker.draining()

    async def drain(self) -> None:
        """Delete batch after batch, paced, until nothing expired is left or the duty is
        lost (or the worker stops)."""
        options = self.worker.options
        while self.may_delete():
            if self.busy():
                await asyncio.sleep(options.retention_pause)
                continue
            started = time.perf_counter()
            flow = self.flows.delete_batch(self.keep, options.retention_batch)
            deleted = await self.store.run(flow)
            took = time.perf_counter() - started
            self.deleted += deleted
            self.took = [*self.took[-999:], took]
            if deleted:
                log.info("retention: deleted %d finished executions", deleted)
            if deleted < options.retention_batch:
                break
            pause = took * (1 / options.retention_share - 1)
            await asyncio.sleep(max(options.retention_pause, pause))

    async def run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            try:
                if not self.held or self.busy():
                    continue
                if not await self.store.run(self.flows.due(self.keep)):
                    continue
                await self.drain()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next beat tries again
                log.warning("worker %s: retention failed: %s", self.worker.worker_id, exc)

    async def leave(self) -> None:
        """Nothing to say: the duty's lease lapses with the worker's presence."""
