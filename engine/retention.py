"""Retention: finished executions are deleted once they are older than ``Engine(retention=)``.

An execution that succeeded, failed or was cancelled (and every archived run of
``continue_as_new``) whose end is older than the retention period (default 30 days) is
deleted with its steps, signals, events and any event left in its queue group. Executions
that have not finished are never touched, however old.

One worker at a time does it: the *retention duty*, a lease carried by the presence beats
(:mod:`raftflow.engine.presence`), so N workers cost no more than one. The holder deletes
in small batches (``WorkerOptions(retention_batch=500)`` executions per request, one
transaction), and only in its idle time: it pauses after each batch three times as long
as the batch took (so the deletes take at most a quarter of the leader's time), and skips a batch
while more than half of its slots run executions. When nothing is left to delete it checks
again at its next beat, with a ``weak`` read (no Raft entry).

All workers should run with the same ``retention``: the duty's holder applies its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import TYPE_CHECKING

from raftflow.engine.errors import ConfigurationError
from raftflow.engine.schedules import SQL
from raftflow.transports.clock import Clock
from raftflow.transports.flow import Flow, Request

if TYPE_CHECKING:
    from raftflow.engine.session import Session

log = logging.getLogger("raftflow.worker")

#: How long finished executions are kept by default.
DEFAULT_RETENTION = timedelta(days=30)
#: After each batch the holder pauses at least this many times as long as the batch took:
#: the deletes take at most a quarter of the leader's time (and of each replica's).
PAUSE_FACTOR = 3.0
#: The duty (:mod:`raftflow.engine.presence`) whose holder deletes expired executions.
RETENTION_DUTY = "retention"


def check_retention(value: object) -> timedelta | None:
    if value is None:
        return None
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ConfigurationError(
            f"retention must be a positive timedelta (or None: keep for ever), not {value!r}"
        )
    return value


class RetentionFlows:
    """The retention's operations on the database (I/O-free flows), each one request."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def due(self, keep: float) -> Flow[bool]:
        """Whether any finished execution is older than ``keep`` seconds (a weak read)."""
        now = yield from self.clock.now()
        params = {"cutoff": now - keep, "batch": 1}
        response = yield Request((SQL("expired_any", params),), level="weak")
        row = response.raise_for_errors()[0].first() or {}
        return bool(row.get("due"))

    def delete_batch(self, keep: float, batch: int) -> Flow[int]:
        """Delete up to ``batch`` expired executions and everything of theirs, in one
        transaction; how many executions it deleted."""
        now = yield from self.clock.now()
        params = {"cutoff": now - keep, "batch": batch, "now": now}
        names = (
            "delete_steps",
            "delete_signals",
            "delete_events",
            "delete_messages",
            "delete_executions",
        )
        response = yield Request(tuple(SQL(name, params) for name in names), transaction=True)
        return int(response.raise_for_errors()[len(names) - 1].rows_affected or 0)


class Retention:
    """The retention task of one worker's run: active while it holds the duty."""

    def __init__(self, session: Session, keep: timedelta) -> None:
        self.session = session
        self.keep = keep.total_seconds()
        self.flows = RetentionFlows(session.backend.queue.clock)
        self.held = False  # set by the presence beat
        self.wake = asyncio.Event()
        self.deleted = 0

    def on_beat(self, held: bool) -> None:
        self.held = held
        if held:
            self.wake.set()

    def busy(self) -> bool:
        session = self.session
        return len(session.tasks) > session.options.concurrency // 2

    async def run(self) -> None:
        options = self.session.options
        while True:
            await self.wake.wait()
            self.wake.clear()
            try:
                if not self.held or self.busy():
                    continue
                if not await self.session.backend.run(self.flows.due(self.keep)):
                    continue
                while self.held and not self.session.stopping.is_set():
                    if self.busy():
                        await asyncio.sleep(options.retention_pause)
                        continue
                    started = time.perf_counter()
                    flow = self.flows.delete_batch(self.keep, options.retention_batch)
                    deleted = await self.session.backend.run(flow)
                    took = time.perf_counter() - started
                    self.deleted += deleted
                    if deleted:
                        log.info("retention: deleted %d finished executions", deleted)
                    if deleted < options.retention_batch:
                        break
                    await asyncio.sleep(max(options.retention_pause, PAUSE_FACTOR * took))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next beat tries again
                log.warning("worker %s: retention failed: %s", self.session.worker_id, exc)
