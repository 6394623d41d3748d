"""What operators see of a deployment: every cluster read, the views merged.

The CLI and the dashboard read through :class:`DeploymentInspector`: an
:class:`~raftflow.stores.inspect.Inspector` on each cluster of the engine (one, unsharded:
its views are exactly that cluster's, one request each). A view of one execution goes to
its own cluster (routed by its id, no lookup); a listing is read on every cluster at once
(:func:`gather`: a thread per cluster) and merged -- executions newest first and cut to
the limit, counts and depths summed per status, priority, lane and limit key, a worker
that serves several clusters listed once (by its id) with the clusters it beats on.

Each cluster's times are on its own clock (its leader's, kept within a fraction of a lease
of the others by NTP); a merged view's ``now`` is the latest of them.
"""

from __future__ import annotations

import builtins
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from raftflow.engine.runtime.schedules import ScheduleFlows, ScheduleInfo
from raftflow.stores.inspect import (
    ExecutionDetail,
    Inspector,
    LimitWaiting,
    PriorityDepth,
    QueueSnapshot,
    WorkerInfo,
)
from raftflow.stores.lanes import LaneDepth
from raftflow.stores.records import ExecutionRecord, Status

if TYPE_CHECKING:
    from raftflow.engine.client.face import ClientFace
    from raftflow.engine.shards.deployment import Shard, Shards

T = TypeVar("T")


def gather(shards: Shards, read: Callable[[Shard], T]) -> list[tuple[Shard, T]]:
    """``read`` on every cluster, each in a thread of its own (each cluster has its own
    connection): the results in the clusters' order. The first failure is raised."""
    if len(shards) == 1:
        (shard,) = shards
        return [(shard, read(shard))]
    with ThreadPoolExecutor(len(shards), thread_name_prefix="raftflow-gather") as pool:
        futures = [(shard, pool.submit(read, shard)) for shard in shards]
        return [(shard, future.result()) for shard, future in futures]


@dataclass(frozen=True, slots=True)
class DeploymentLane(LaneDepth):
    """A lane over every cluster: its figures summed, ``workers`` the distinct live workers
    that serve it anywhere."""

    #: The clusters where it holds executions that no live worker serves (sharded).
    unserved_on: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeploymentWorker(WorkerInfo):
    """A worker over every cluster it serves: ``concurrency`` and ``running`` summed (a
    worker has its slots on each cluster), its latest beat, its leases on all of them."""

    #: The clusters it beats on (sharded; empty for one cluster).
    clusters: tuple[str, ...] = ()


class DeploymentInspector:
    """The operators' reads over every cluster of ``shards``."""

    def __init__(self, shards: Shards) -> None:
        self.shards = shards
        self._inspectors = {shard.name: Inspector(shard.store.database) for shard in shards}

    @property
    def sharded(self) -> bool:
        return self.shards.sharded

    def cluster_of(self, execution_id: str) -> str:
        """The name of the cluster that holds ``execution_id`` (``""`` unsharded)."""
        return self.shards.of(execution_id).name

    def each(self, read: Callable[[Inspector], T]) -> list[tuple[str, T]]:
        """``read`` on every cluster's inspector (:func:`gather`): (cluster name, result)."""
        found = gather(self.shards, lambda shard: read(self._inspectors[shard.name]))
        return [(shard.name, value) for shard, value in found]

    def list(
        self,
        *,
        status: Status | str | None = None,
        workflow: str | None = None,
        since: float = 0.0,
        limit: int = 50,
    ) -> builtins.list[ExecutionRecord]:
        """Executions created at or after ``since``, newest first: the ``limit`` most
        recent of every cluster."""
        found = self.each(
            lambda one: one.list(status=status, workflow=workflow, since=since, limit=limit)
        )
        return newest_first([record for _name, records in found for record in records], limit)

    def counts(self, since: float = 0.0) -> dict[Status, int]:
        """Executions created at or after ``since``, per status, of every cluster."""
        total: Counter[Status] = Counter({status: 0 for status in Status})
        for _name, counts in self.each(lambda one: one.counts(since)):
            total.update(counts)
        return dict(total)

    def detail(self, execution_id: str) -> ExecutionDetail:
        """One execution in full, read on its cluster."""
        return self._inspectors[self.cluster_of(execution_id)].detail(execution_id)

    def queue(self) -> QueueSnapshot:
        return merge_queues([snapshot for _name, snapshot in self.each(Inspector.queue)])

    def lanes(self) -> builtins.list[DeploymentLane]:
        return merge_lanes(self.each(Inspector.lanes), self.sharded)

    def workers(self, within: float = 60.0) -> builtins.list[DeploymentWorker]:
        return merge_workers(self.each(lambda one: one.workers(within)), self.sharded)

    def schedules(self) -> builtins.list[ScheduleInfo]:
        """The cron schedules of every cluster (a ``weak`` read each), by workflow."""
        found = self.each(
            lambda one: one.database.run(ScheduleFlows(one.flows.clock).list(level="weak"))
        )
        return sorted(
            (info for _name, infos in found for info in infos), key=lambda info: info.workflow
        )

    def now(self) -> float:
        """The latest of the clusters' clocks."""
        return max(now for _name, now in self.each(Inspector.now))


def inspector_of(engine: ClientFace) -> DeploymentInspector:
    """The operators' reads over every cluster ``engine`` reaches."""
    return DeploymentInspector(engine.shards)


def newest_first(records: Iterable[ExecutionRecord], limit: int) -> list[ExecutionRecord]:
    """The ``limit`` most recent of ``records`` (the order each cluster lists them in)."""
    return sorted(records, key=lambda record: (-record.created_at, record.id))[:limit]


def merge_queues(snapshots: Sequence[QueueSnapshot]) -> QueueSnapshot:
    """The clusters' queues as one: depths per priority and waiters per limit key summed
    (each cluster keeps its own limits: a key's slots are the sum of its clusters')."""
    if len(snapshots) == 1:
        return snapshots[0]
    priorities = [
        PriorityDepth(
            priority=depths[0].priority,
            groups=sum(depth.groups for depth in depths),
            ready=sum(depth.ready for depth in depths),
            oldest_ready_age=_oldest(depth.oldest_ready_age for depth in depths),
        )
        for depths in zip(*(snapshot.priorities for snapshot in snapshots))
    ]
    by_key: dict[str, list[LimitWaiting]] = {}
    for snapshot in snapshots:
        for waiting in snapshot.waiting:
            by_key.setdefault(waiting.limit_key, []).append(waiting)
    return QueueSnapshot(
        now=max(snapshot.now for snapshot in snapshots),
        priorities=priorities,
        parked=sum(snapshot.parked for snapshot in snapshots),
        leases=[lease for snapshot in snapshots for lease in snapshot.leases],
        waiting=[_limit(waits) for _key, waits in sorted(by_key.items())],
        schedules=sum(snapshot.schedules for snapshot in snapshots),
    )


def merge_lanes(
    per_cluster: Sequence[tuple[str, Sequence[LaneDepth]]], sharded: bool
) -> list[DeploymentLane]:
    """The clusters' lanes as one list, by lane: each lane's figures summed, its serving
    workers counted once, and where it waits for a worker (``unserved_on``)."""
    by_lane: dict[str, list[tuple[str, LaneDepth]]] = {}
    for name, depths in per_cluster:
        for depth in depths:
            by_lane.setdefault(depth.lane, []).append((name, depth))
    merged = []
    for lane, found in sorted(by_lane.items()):
        depths = [depth for _name, depth in found]
        serving = tuple(sorted({worker for depth in depths for worker in depth.serving}))
        merged.append(
            DeploymentLane(
                lane=lane,
                groups=sum(depth.groups for depth in depths),
                ready=sum(depth.ready for depth in depths),
                leased=sum(depth.leased for depth in depths),
                oldest_ready_age=_oldest(depth.oldest_ready_age for depth in depths),
                workers=len(serving),
                serving=serving,
                unserved_on=tuple(
                    name for name, depth in found if sharded and depth.groups and not depth.serving
                ),
            )
        )
    return merged


def merge_workers(
    per_cluster: Sequence[tuple[str, Sequence[WorkerInfo]]], sharded: bool
) -> list[DeploymentWorker]:
    """Each worker once, by id, with the clusters it beats on."""
    by_id: dict[str, list[tuple[str, WorkerInfo]]] = {}
    for name, workers in per_cluster:
        for worker in workers:
            by_id.setdefault(worker.worker_id, []).append((name, worker))
    merged = []
    for worker_id, found in sorted(by_id.items()):
        beats = [worker for _name, worker in found]
        latest = max(beats, key=lambda worker: worker.seen_at)
        merged.append(
            DeploymentWorker(
                worker_id=worker_id,
                host=latest.host,
                pid=latest.pid,
                version=latest.version,
                concurrency=sum(worker.concurrency for worker in beats),
                min_priority=latest.min_priority,
                state="/".join(sorted({worker.state for worker in beats})),
                started_at=min(worker.started_at for worker in beats),
                seen_at=latest.seen_at,
                steps=max(worker.steps for worker in beats),  # one count, each beat's own time
                running=sum(worker.running for worker in beats),
                leases=[lease for worker in beats for lease in worker.leases],
                clusters=tuple(name for name, _worker in found) if sharded else (),
            )
        )
    return merged


def _oldest(ages: Iterable[float | None]) -> float | None:
    known = [age for age in ages if age is not None]
    return max(known) if known else None


def _limit(waits: Sequence[LimitWaiting]) -> LimitWaiting:
    """One limit key's waiters over the clusters: the next admitted is the oldest of theirs."""
    first = min(waits, key=lambda waiting: waiting.next_since)
    return replace(
        first,
        limit=sum(waiting.limit for waiting in waits),
        holding=sum(waiting.holding for waiting in waits),
        waiting=sum(waiting.waiting for waiting in waits),
    )
