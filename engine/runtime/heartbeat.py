"""The heartbeat: the leases of runs whose step outlasts a quarter of the visibility are
renewed, all of one worker's in one request per beat.

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
