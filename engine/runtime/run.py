"""One run of a worker: the claim loop, its slots, its duties, and the drain.

One asyncio loop does all the I/O: the claim loop, the heartbeat, the committer
(:mod:`.committer`) and the duties (:mod:`.duties`). Async workflows run as tasks on that
loop; sync workflows run in a thread pool and hand their commits to the loop. Per step, on
rqlite, the hot path costs one HTTP request and one Raft entry (the fenced commit that also
acks and publishes); a claim (one request, which also reads what the runs need) is needed
only when an execution is picked up, and at most every ``steps_per_turn`` steps while
other executions wait to be claimed, which keeps service round-robin.

Idle workers poll with a ``weak`` read (no Raft entry), and claim only when it says there
is work. A failure outside user code (the network, rqlite, the clock, a bug of ours) is
logged and never becomes an execution's outcome (:mod:`.dispatch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from raftflow.engine.runtime.dispatch import Dispatcher
from raftflow.engine.runtime.duties import Duty
from raftflow.engine.runtime.heartbeat import Heartbeat
from raftflow.engine.runtime.host import Definitions, RunHost, WorkerContext
from raftflow.engine.runtime.lanes import Adoption, ServedLanes
from raftflow.engine.runtime.local import LocalWorkers
from raftflow.engine.runtime.presence import Presence, PresenceState
from raftflow.engine.runtime.relay import RELAY_INTERVAL, UNSHARDED_INTERVAL, Relay
from raftflow.engine.runtime.retention import Retention
from raftflow.engine.runtime.runcache import RunCache
from raftflow.engine.runtime.schedules import ScheduleKeeper
from raftflow.engine.workflow.schedule import Schedule
from raftflow.stores.contract import AsyncStore
from raftflow.stores.records import Claimed
from raftflow.transports.contract import AsyncTransport

from raftflow.errors import AuthenticationError, ConfigurationError, ProtocolError

log = logging.getLogger("raftflow.worker")

#: An idle sharded worker polls each cluster at least this often (seconds).
MAX_SHARDED_POLL = 1.0


def idle_poll_cap(max_poll_interval: float, clusters: int) -> float:
    """The longest wait between two idle polls of one cluster by a worker serving
    ``clusters``: one cluster's, spread over them all (a worker's idle reads per second
    stay those of one cluster), but never beyond :data:`MAX_SHARDED_POLL` -- nor below
    one cluster's."""
    if clusters <= 1:
        return max_poll_interval
    return max(max_poll_interval, min(max_poll_interval * clusters, MAX_SHARDED_POLL))


#: Errors a worker does not retry: it stops and raises them.
FATAL_ERRORS = (AuthenticationError, ConfigurationError, ProtocolError)


@dataclass(frozen=True)
class Served:
    """What a worker serves: the engine's definitions, schedules, retention and the
    bridge to the rest of its process -- given to the run, never reached for."""

    definitions: Definitions
    lanes: ServedLanes  # what it claims (engine/runtime/lanes.py)
    schedules: dict[str, Schedule]
    retention: timedelta | None
    local: LocalWorkers
    presence: PresenceState


class WorkerRun:
    """Everything that lives while :meth:`Worker.run
    <raftflow.engine.runtime.worker.Worker.run>` runs."""

    def __init__(
        self,
        worker: WorkerContext,
        *,
        served: Served,
        transport: AsyncTransport,
        store: AsyncStore,
        shard: str = "",
        elsewhere: Callable[[str], AsyncStore | None] = lambda _id: None,
        clusters: int = 1,
    ) -> None:
        self.worker_id = worker_id = worker.worker_id
        #: The cluster it claims from ("" unsharded: a worker has one run per cluster).
        self.shard = shard
        #: How long its idle polls wait at most: ``max_poll_interval``, times the clusters
        #: its worker serves (up to :data:`MAX_SHARDED_POLL`), so that an idle worker's
        #: polls, summed over its clusters, come no more often than on one cluster.
        self.max_poll = idle_poll_cap(worker.options.max_poll_interval, clusters)
        self.options = options = worker.options
        self.stats = worker.stats
        self.hooks = worker.hooks
        self.served = served
        self.transport = transport
        self.store = store
        self.loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        self.slot_freed = asyncio.Event()
        self.tasks: dict[asyncio.Task[None], None] = {}  # one per claimed event in a turn
        self.runs = RunCache(options.sticky_cache, options.sticky_cache_mb)
        self.host = RunHost(
            worker,
            definitions=served.definitions,
            transport=transport,
            store=store,
            local=served.local,
            lanes=served.lanes,
            stopping=self.stopping,
            running=lambda: len(self.dispatch.activations),
            elsewhere=elsewhere,
        )
        threads = options.concurrency + options.sticky_cache  # a kept sync run keeps its thread
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="raftflow-workflow")
        self.dispatch = Dispatcher(self.host, options, served.schedules, self.runs, self.pool)
        self.heartbeat = Heartbeat(
            worker_id, transport, options.visibility, lambda: self.dispatch.activations
        )
        keep = served.retention
        retention = None if keep is None else Retention(self, store, keep)
        self.duties: list[Duty] = [Presence(self, store, served.presence, retention, shard)]
        if retention is not None:
            self.duties.append(retention)
        if options.adopt_older:
            self.duties.append(Adoption(worker_id, store, served.lanes))
        interval = RELAY_INTERVAL if shard else UNSHARDED_INTERVAL
        self.relay = Relay(self, store, elsewhere, interval)
        self.host.news = self.relay.news
        self.duties.append(self.relay)
        self.duties.append(
            ScheduleKeeper(
                worker_id, store, list(served.schedules.values()), retry_delay=options.retry_delay
            )
        )
        self._reserved = 0  # slots promised to executions started in this process
        self._reserve_lock = threading.Lock()

    # -- what duties and hooks see (WorkerView) ---------------------------------------------

    def running(self) -> int:
        return len(self.tasks)

    @property
    def lanes(self) -> tuple[str, ...]:
        return self.served.lanes.current

    @property
    def starts(self) -> str:
        return self.served.lanes.starts

    def draining(self) -> bool:
        return self.stopping.is_set()

    @property
    def round_trips(self) -> int:
        return int(getattr(self.store, "round_trips", 0))

    def request_stop(self) -> None:
        """Thread-safe: stop claiming and drain."""
        self.loop.call_soon_threadsafe(self.stopping.set)

    # -- the start fast path (runtime/local.py) ----------------------------------------------

    @property
    def visibility(self) -> float:
        return self.options.visibility

    def reserve(self, priority: int, lane: str) -> bool:
        """Thread-safe: take a free slot for an execution this process is starting (of a
        ``lane`` it serves)."""
        with self._reserve_lock:
            free = self.options.concurrency - len(self.tasks) - self._reserved
            if (
                free <= 0
                or self.stopping.is_set()
                or priority < self.options.min_priority
                or lane not in self.served.lanes
            ):
                return False
            self._reserved += 1
            return True

    def unreserve(self) -> None:
        """Thread-safe: give back a slot taken by :meth:`reserve` (the start found its
        execution there, or failed). The claim loop may be waiting for a slot: wake it."""
        with self._reserve_lock:
            self._reserved -= 1
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits
            self.loop.call_soon_threadsafe(self.slot_freed.set)

    def adopt(self, claimed: Claimed) -> None:
        """Thread-safe: run an execution whose first event was published leased to us.
        Until its turn here is over, this process's result() waiters wait for our news."""
        local, execution_id = self.served.local, claimed.lease.group_id
        local.hold(execution_id, None if claimed.execution is None else claimed.execution.workflow)
        try:
            self.loop.call_soon_threadsafe(self._adopt, claimed)
        except BaseException:  # the loop is closed: nobody will run it here
            local.release(execution_id)
            raise

    def _adopt(self, claimed: Claimed) -> None:
        # The reserved slot becomes the task's: none is freed, so the claim loop is not
        # woken (unreserve() would, through the loop's self-pipe, for nothing).
        with self._reserve_lock:
            self._reserved -= 1
        self.stats.adopted += 1
        execution_id = claimed.lease.group_id
        try:
            task = self._spawn(claimed)
        except BaseException:
            self.served.local.release(execution_id)
            self.slot_freed.set()
            raise
        task.add_done_callback(lambda _: self.served.local.release(execution_id))

    def _spawn(self, claimed: Claimed) -> asyncio.Task[None]:
        task = asyncio.create_task(self.dispatch.handle(claimed))
        self.tasks[task] = None
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.pop(task, None)
        self.slot_freed.set()

    # -- the run ----------------------------------------------------------------------------

    async def run(self, on_ready: Callable[[], None] | None) -> None:
        background = [
            asyncio.create_task(self.host.committer.run(), name="raftflow-committer"),
            asyncio.create_task(self.heartbeat.run(), name="raftflow-heartbeat"),
            *(asyncio.create_task(duty.run(), name=duty.name) for duty in self.duties),
        ]
        where = f" on {self.shard}" if self.shard else ""
        log.info(
            "worker %s started%s (concurrency %d)", self.worker_id, where, self.options.concurrency
        )
        try:
            on_ready = await self._reach(on_ready)
            if not self.store.split:  # a split pair's first event must reach the queue
                self.served.local.add(self)
            if on_ready is not None:
                on_ready()
            try:
                await self._claim_loop()
            finally:
                if not self.store.split:
                    self.served.local.remove(self)
            await self._drain()
        finally:
            await self._close(background)

    async def _reach(self, on_ready: Callable[[], None] | None) -> Callable[[], None] | None:
        """Sync the clock before the first claim. A cluster out of reach is waited for,
        as a claim that fails is retried: the run counts as ready meanwhile (``on_ready``
        called; None returned), so that a sharded worker's other clusters are served --
        one cluster down does not stop them."""
        while not self.stopping.is_set():
            try:
                await self.store.run(self.store.clock.now())
                return on_ready
            except FATAL_ERRORS:
                raise
            except Exception as exc:
                log.warning(
                    "worker %s: cannot reach its cluster, retrying: %s", self.worker_id, exc
                )
                if on_ready is not None:
                    on_ready()
                    on_ready = None
                await self._until(self.stopping, self.options.retry_delay)
        return on_ready

    async def _close(self, background: Sequence[asyncio.Task[None]]) -> None:
        tasks = list(background)
        if self.host.waiting_read is not None:
            tasks.append(self.host.waiting_read)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for duty in self.duties:
            await duty.leave()
        self.runs.clear()
        self.pool.shutdown(wait=False, cancel_futures=True)
        await self.store.close()
        if self.store.split:  # its own connection to the queue
            await self.transport.close()
        stats = self.stats
        log.info(
            "worker %s stopped: %d steps, %d commits in %d requests, %d claims, %d round trips",
            self.worker_id,
            stats.steps,
            stats.commits,
            stats.commit_requests,
            stats.claims,
            self.round_trips,
        )

    async def _claim_loop(self) -> None:
        options, stats = self.options, self.stats
        poll = options.poll_interval
        idle = True
        while not self.stopping.is_set():
            free = options.concurrency - len(self.tasks) - self._reserved
            if free <= 0:
                self.slot_freed.clear()
                await self._until(self.slot_freed, None)
                continue
            try:
                if idle:
                    stats.polls += 1
                    if self.store.split:  # parks come due in the store: on to the queue
                        await self.store.relay()
                    ready = await self.transport.claimable(
                        options.min_priority, lanes=self.served.lanes.current
                    )
                    if not ready:
                        await self._until(self.stopping, poll)
                        poll = min(poll * 2, self.max_poll)
                        continue
                started = time.perf_counter()
                claimed = await self._claim(free)
                self.hooks.after_claim(claimed=len(claimed), duration=time.perf_counter() - started)
            except FATAL_ERRORS:
                raise  # retrying cannot help: credentials, permissions, a bug
            except Exception as exc:
                log.warning("worker %s: claim failed, retrying: %s", self.worker_id, exc)
                await self._until(self.stopping, options.retry_delay)
                continue
            stats.claims += 1
            stats.claimed += len(claimed)
            idle = len(claimed) < free
            if not claimed:
                stats.empty_claims += 1
                await self._until(self.stopping, poll)
                poll = min(poll * 2, self.max_poll)
                continue
            poll = options.poll_interval
            for item in claimed:
                self._spawn(item)

    async def _claim(self, free: int) -> list[Claimed]:
        """Lease up to ``free`` events and read what their runs need, in one request."""
        options = self.options
        return await self.store.claim(
            self.transport,
            self.worker_id,
            options.visibility,
            free,
            options.min_priority,
            self.runs.fingerprints(),
            self.served.lanes.current,
        )

    async def _until(self, event: asyncio.Event, timeout: float | None) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    async def _drain(self) -> None:
        if not self.tasks:
            return
        log.info("worker %s draining %d executions", self.worker_id, len(self.tasks))
        _done, pending = await asyncio.wait(set(self.tasks), timeout=self.options.drain_timeout)
        held = self.dispatch.held_leases()
        for task in [t for t in self.tasks if t in pending]:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)
        if held:  # steps still running at the deadline: free their executions now
            with contextlib.suppress(Exception):
                await self.transport.release_leases(held)
