"""A worker's presence: who runs, since when, doing what -- for ``raftflow workers``.

Every ``BEAT_INTERVAL`` seconds a worker upserts its row of the ``workers`` table (one
request, one Raft entry: a write every 10 s per worker, whatever its load), and a last
one with state ``stopped`` when it stops. Its in-flight executions are not written here:
they are its leases, read live from the queue (:mod:`raftflow.stores.inspect`).

The same beat carries *duties*: a task that one worker at a time should do, held as a
lease in ``worker_duties`` that the holder renews with each beat and that another worker
takes once it lapses (three beats). The only duty today is sampling the queue's depth for
the Prometheus metrics (:mod:`raftflow.engine.ops.metrics`): workers whose hooks ask for it
(``Hooks.samples_queue``) compete, and the holder reads the queue after its beat, so N
workers cost one depth read per beat, not N.

A failed beat is logged and the next one tries again: presence is never fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from raftflow.engine.runtime.retention import RETENTION_DUTY
from raftflow.stores.inspect import OPS, InspectFlows, QueueSnapshot
from raftflow.transports.db.flow import Flow, Request
from raftflow.transports.payload import to_json

if TYPE_CHECKING:
    from raftflow.engine.runtime.duties import WorkerView
    from raftflow.engine.runtime.retention import Retention
    from raftflow.stores.contract import AsyncStore

log = logging.getLogger("raftflow.worker")

#: Seconds between two beats of a worker.
BEAT_INTERVAL = 10.0
#: The duty of sampling the queue's depth for the metrics.
QUEUE_SAMPLER = "queue_sampler"
#: A worker not seen for this long is removed from ``workers`` (by the others' beats).
FORGET_AFTER = 86_400.0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("raftflow")
    except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
        return "unknown"


VERSION = _version()


@dataclass
class PresenceState:
    """What the worker's last beats learned (one beat per cluster it serves)."""

    seen_at: float | None = None  # the last beat that was written (cluster clock)
    #: Its last sample of each cluster's queue whose sampling duty it holds ("": unsharded).
    samples: dict[str, QueueSnapshot] = field(default_factory=dict)

    @property
    def sampler(self) -> bool:
        """Whether it holds the queue-sampling duty (of a cluster, sharded)."""
        return bool(self.samples)

    @property
    def queue(self) -> QueueSnapshot | None:
        """Its last sample of the queue (unsharded; sharded, :attr:`samples`), if it
        holds the sampling duty."""
        return next(iter(self.samples.values()), None) if len(self.samples) == 1 else None


class Presence:
    """The beat of one worker's run (a :class:`~raftflow.engine.runtime.duties.Duty`)."""

    name = "raftflow-presence"

    def __init__(
        self,
        worker: WorkerView,
        store: AsyncStore,
        state: PresenceState,
        retention: Retention | None,
        shard: str = "",
    ) -> None:
        self.worker = worker
        self.store = store
        self.state = state
        self.shard = shard
        self.retention = retention
        self.inspect = InspectFlows(store.clock)
        self.started_at: float | None = None

    async def run(self) -> None:
        while True:
            try:
                await self.store.run(self.beat())
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("worker %s: presence beat failed: %s", self.worker.worker_id, exc)
            await asyncio.sleep(BEAT_INTERVAL)

    async def leave(self) -> None:
        """The last beat: state ``stopped``, the duties given up (best effort)."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.store.run(self.beat(stopped=True)), 5.0)

    def beat(self, *, stopped: bool = False) -> Flow[None]:
        worker = self.worker
        now = yield from self.store.clock.now()
        if self.started_at is None:
            self.started_at = now
        state = "stopped" if stopped else "draining" if worker.draining() else "running"
        worker_id = worker.worker_id
        statements = [
            OPS(
                "beat",
                {
                    "worker_id": worker_id,
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "version": VERSION,
                    "concurrency": worker.options.concurrency,
                    "min_priority": worker.options.min_priority,
                    "state": state,
                    "started_at": self.started_at,
                    "now": now,
                    "steps": worker.stats.steps,
                    "running": worker.running(),
                    "lanes": to_json(list(worker.lanes), what="lanes"),
                    "starts": worker.starts,
                },
            ),
            OPS("forget_workers", {"cutoff": now - FORGET_AFTER}),
        ]
        duty = {"duty": QUEUE_SAMPLER, "worker_id": worker_id}
        competes = worker.hooks.samples_queue and not stopped
        if competes:
            expiry = now + 3 * BEAT_INTERVAL
            statements.append(OPS("take_duty", {**duty, "now": now, "expiry": expiry}))
            statements.append(OPS("duty_holder", duty))
        elif stopped:
            statements.append(OPS("drop_duty", duty))
        # The retention duty (engine/runtime/retention.py): its holder deletes expired executions.
        retention = {"duty": RETENTION_DUTY, "worker_id": worker_id}
        retains = self.retention is not None and not stopped
        if retains:
            expiry = now + 3 * BEAT_INTERVAL
            statements.append(OPS("take_duty", {**retention, "now": now, "expiry": expiry}))
            statements.append(replace(OPS("duty_holder", retention), name="ops.retention_holder"))
        elif stopped and self.retention is not None:
            statements.append(OPS("drop_duty", retention))
        response = yield Request(tuple(statements), transaction=True)
        response.raise_for_errors()
        self.state.seen_at = now
        holder = response.result_of("ops.duty_holder").first() if competes else None
        sampler = bool(holder and holder["worker_id"] == worker_id)
        if retains and self.retention is not None:
            keeper = response.result_of("ops.retention_holder").first()
            self.retention.on_beat(bool(keeper and keeper["worker_id"] == worker_id))
        if sampler:
            self.state.samples[self.shard] = yield from self.inspect.queue()
        else:
            self.state.samples.pop(self.shard, None)
