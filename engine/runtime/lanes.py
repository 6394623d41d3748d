"""The lanes a worker claims, and the adoption of older versions' executions.

A worker claims the lanes of its own version (engine/workflow/queues.py): the executions
its code started, or code of the same version. Told to adopt (``--adopt-older``), it also
claims, from its next beat on, the lanes of its workflows at the versions that no live
worker serves: the executions a finished deploy left behind, which its code then replays
(check them first: ``raftflow replay``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from raftflow.engine.runtime.presence import BEAT_INTERVAL
from raftflow.engine.workflow.queues import lane_parts, served_lanes
from raftflow.engine.workflow.registry import Registry
from raftflow.engine.workflow.starts import publication
from raftflow.stores.contract import AsyncStore
from raftflow.stores.lanes import LaneFlows

log = logging.getLogger("raftflow.worker")


class ServedLanes:
    """What one worker run claims now (read by its claims; changed only by its adoption)."""

    def __init__(
        self,
        registry: Registry,
        queues: Sequence[str] | None,
        scheduled: Iterable[str],
    ) -> None:
        self.version = registry.version
        self.workflows = {
            (w.queue, w.name)
            for w in registry.workflows.values()
            if queues is None or w.queue in queues
        }
        self.own = served_lanes(self.workflows, None, [self.version], scheduled)
        self.current = self.own
        #: What its beats publish for the starts by name (engine/workflow/starts.py).
        self.starts = publication(
            self.version,
            {registry.lane(w): registry.start_settings(w) for w in registry.workflows.values()},
        )
        self.adopted: tuple[str, ...] = ()

    def __contains__(self, lane: object) -> bool:
        return lane in self.current

    def adoptable(self, present: Iterable[str], served: Iterable[str | None]) -> tuple[str, ...]:
        """Of the lanes ``present`` (holding groups now), those of this worker's workflows
        at another version that no live worker serves (``served``: every lane of the live
        workers but this one; None in it: a worker that claims every lane)."""
        others = set(served)
        if None in others:
            return ()
        found = []
        for lane in present:
            parts = lane_parts(lane)
            if parts is None or parts[2] is None or parts[2] == self.version:
                continue
            if (parts[0], parts[1]) in self.workflows and lane not in others:
                found.append(lane)
        return tuple(sorted(found))

    def adopt(self, lanes: tuple[str, ...]) -> None:
        if lanes != self.adopted:
            log.info("adopting the executions of lanes no live worker serves: %s", lanes)
            self.adopted = lanes
            self.current = tuple(sorted({*self.own, *lanes}))


class Adoption:
    """The duty of a worker told to adopt: every beat, the lanes left behind."""

    name = "raftflow-adoption"

    def __init__(self, worker_id: str, store: AsyncStore, lanes: ServedLanes) -> None:
        self.worker_id = worker_id
        self.flows = LaneFlows(store.clock)
        self.store = store
        self.lanes = lanes

    async def run(self) -> None:
        while True:
            try:
                present, served = await self.store.run(self.flows.present(self.worker_id))
                self.lanes.adopt(self.lanes.adoptable(present, served))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("worker %s: reading the lanes to adopt failed: %s", self.worker_id, exc)
            await asyncio.sleep(BEAT_INTERVAL)

    async def leave(self) -> None:
        return None
