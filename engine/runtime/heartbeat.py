"""The heartbeat: the leases a worker holds are renewed, those due in one request per beat.

It wakes every quarter of the lease (the visibility) and renews every lease held with less
than half of it left, so a renewal is sent with at least a quarter of the lease still to
run: that quarter is what one write request has to land in, hence :data:`MIN_LEASE`. A
step's commit within a turn leaves its lease as it is (a lean commit writes the record
alone), so an execution held has its lease renewed about every half to three quarters of
a lease, whatever its steps do. A beat with nothing due sends nothing. A worker holding
executions sends at most one request (one Raft entry) per beat: at most four per lease
length, with a statement for each lease due. Both fall as the lease grows; the requests do
not grow with the executions a worker holds, only their statements do.

A beat that fails is logged and the next one tries again; a lease found lost marks its run
as no longer held, so that its result is refused (the fence would refuse it anyway).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import replace

from raftflow.engine.workflow.activation import Activation
from raftflow.transports.contract import AsyncTransport

log = logging.getLogger("raftflow.worker")

#: The shortest lease a worker accepts, in seconds: a renewal then has a quarter of it,
#: 250 ms, to land -- a write round trip on a busy cluster with a margin. Shorter leases
#: would lapse under healthy workers (their steps refused, and run again elsewhere).
MIN_LEASE = 1.0


class Heartbeat:
    """Renews the leases of the runs ``activations()`` lists (a task of the worker run)."""

    def __init__(
        self,
        worker_id: str,
        transport: AsyncTransport,
        visibility: float,
        activations: Callable[[], Iterable[Activation]],
    ) -> None:
        self.worker_id = worker_id
        self.transport = transport
        self.visibility = visibility
        self.activations = activations

    async def run(self) -> None:
        """Beat every quarter of the visibility. Never dies: a failed beat is logged."""
        while True:
            await asyncio.sleep(self.visibility / 4)
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("worker %s: heartbeat failed: %s", self.worker_id, exc)

    async def beat(self) -> None:
        clock = self.transport.clock
        horizon = clock.estimate() + self.visibility / 2
        due = [
            (a, a.lease, a.commits)
            for a in self.activations()
            if a.held and not a.committing and a.lease.expires_at < horizon
        ]
        if not due:
            return
        renewed = await self.transport.extend_leases(
            [lease for _, lease, _ in due], self.visibility
        )
        for (activation, lease, commits), fresh in zip(due, renewed):
            if activation.commits != commits or activation.lease.seq != lease.seq:
                continue  # it committed meanwhile: the commit renewed its lease
            if fresh is not None:
                activation.lease = replace(activation.lease, expires_at=fresh.expires_at)
            else:
                activation.held = False
                log.warning(
                    "execution %s: lease lost during a step; its result will be refused",
                    activation.execution_id,
                )
