"""The worker: claims executions' events, runs their workflows, commits their steps.

:class:`Worker` is the handle (options, stats, :meth:`Worker.stop`); each
:meth:`Worker.run` creates a :class:`~raftflow.engine.runtime.run.WorkerRun` holding
everything that lives only while it runs (the event loop, the async twins of the engine's
transport and store on one connection, the committer, the thread pool, the running
executions), and gives it what the engine serves -- nothing reaches back for the engine.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raftflow.engine.runtime.heartbeat import MIN_LEASE
from raftflow.engine.runtime.hooks import HookChain
from raftflow.engine.runtime.presence import PresenceState
from raftflow.engine.workflow.queues import check_queues
from raftflow.engine.workflow.schedule import SCHEDULE_PREFIX
from raftflow.transports.payload import check_id, check_priority

from raftflow.errors import ConfigurationError, InvalidArgumentError

if TYPE_CHECKING:
    from raftflow.engine.app import Engine
    from raftflow.engine.runtime.run import WorkerRun
    from raftflow.engine.shards.deployment import Shards
    from raftflow.stores.contract import AsyncStore

log = logging.getLogger("raftflow.worker")


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs. Every field has a default that suits a small cluster.

    ``visibility`` is the lease length in seconds (``raftflow worker --lease``; 30, at least
    1): the executions of a worker that crashed or was killed wait up to that long before
    another worker takes them over. Shorter recovers faster but costs more heartbeat
    writes, and a worker paused for longer than about three quarters of it loses its
    leases (its late commits are refused). See the Operate guide, "Recovery time".
    """

    concurrency: int = 4
    worker_id: str | None = None
    min_priority: int = 0
    # The named queues it serves (None: every queue of the workflows it registers). It
    # claims only executions of the workflows it registers, in these queues.
    queues: tuple[str, ...] | None = None
    # Also claim, from its next beat on, the executions of its workflows that code of
    # another version started and that no live worker serves (engine/runtime/lanes.py).
    adopt_older: bool = False
    # The lease length, in seconds (``raftflow worker --lease``): how long an execution this
    # worker holds stays its own without the heartbeat renewing it -- and so how long the
    # executions of a worker that crashed, was killed or cut off wait before another worker
    # takes them over (docs/guides/operate.md, "Recovery time"). At least MIN_LEASE.
    visibility: float = 30.0
    # Steps run without a new claim before the turn is handed back -- when another
    # execution waits to be claimed (read at most every WAITING_TTL s). With nothing
    # waiting, a hand-back would only cost a claim: a Raft entry, and the claim's wait.
    steps_per_turn: int = 16
    # Hand the turn back every steps_per_turn steps even with nothing waiting (the
    # behaviour before; what tests of turn boundaries and replays use).
    yield_idle_turns: bool = False
    poll_interval: float = 0.01  # first idle poll delay, doubling up to max_poll_interval
    max_poll_interval: float = 0.1  # idle polls are weak reads: no Raft entry
    drain_timeout: float = 30.0  # on stop: how long running steps may take to finish
    park_unknown: float = 60.0  # how long an event this worker cannot run stays parked
    max_batch: int = 64  # commits per request at most
    # Commit requests in flight at once. 1 on rqlite: it is CPU-bound, and more requests
    # only split the batches (docs/performance.md, "What bounds the numbers").
    max_inflight: int = 1
    retry_delay: float = 0.5  # after a failed claim; the first back-off of a hand-back
    # Runs kept suspended between turns (a claim that finds nothing changed resumes one
    # without reading or replaying its history); least recently used out. 0: none.
    sticky_cache: int = 256
    # And while the process's resident memory is above this many MiB, the least recently
    # used of them are dropped too (they replay at their next turn). None: no memory limit.
    sticky_cache_mb: float | None = None
    # Retention (engine/runtime/retention.py): executions deleted per request, the share of time
    # the deletes may take (after a batch that took t, a pause of t * (1/share - 1)), and
    # the least pause between two requests. Small and slow, so claims do not wait behind
    # the deletes (bench/retention.py measures it).
    retention_batch: int = 50
    retention_share: float = 0.05
    retention_pause: float = 0.1

    def __post_init__(self) -> None:
        for name in (
            "concurrency",
            "steps_per_turn",
            "max_batch",
            "max_inflight",
            "sticky_cache",
            "retention_batch",
        ):
            value = getattr(self, name)
            least = 0 if name == "sticky_cache" else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InvalidArgumentError(f"{name} must be an int >= {least}, not {value!r}")
        for name in (
            "visibility",
            "poll_interval",
            "max_poll_interval",
            "drain_timeout",
            "park_unknown",
            "retry_delay",
            "retention_pause",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidArgumentError(f"{name} must be a number of seconds, not {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise InvalidArgumentError(f"{name} must be positive and finite, not {value!r}")
        if self.visibility < MIN_LEASE:
            raise InvalidArgumentError(
                f"visibility (the lease length) must be at least {MIN_LEASE:g} s, not "
                f"{self.visibility!r}: the heartbeat renews a lease with a quarter of it left "
                "at worst, and the renewal must reach the cluster within that quarter"
            )
        share = self.retention_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
            raise InvalidArgumentError(f"retention_share must be in (0, 1], not {share!r}")
        if self.sticky_cache_mb is not None and (
            isinstance(self.sticky_cache_mb, bool)
            or not isinstance(self.sticky_cache_mb, (int, float))
            or not math.isfinite(self.sticky_cache_mb)
            or self.sticky_cache_mb <= 0
        ):
            raise InvalidArgumentError(
                f"sticky_cache_mb must be a positive number or None, not {self.sticky_cache_mb!r}"
            )
        if not isinstance(self.adopt_older, bool):
            raise InvalidArgumentError(f"adopt_older must be a bool, not {self.adopt_older!r}")
        if not isinstance(self.yield_idle_turns, bool):
            raise InvalidArgumentError(
                f"yield_idle_turns must be a bool, not {self.yield_idle_turns!r}"
            )
        check_priority(self.min_priority)
        object.__setattr__(self, "queues", check_queues(self.queues))
        if self.worker_id is not None:
            check_id(self.worker_id, what="worker_id")


@dataclass
class WorkerStats:
    """Counters for tests, benchmarks and logs."""

    claims: int = 0
    claimed: int = 0
    empty_claims: int = 0
    polls: int = 0
    commits: int = 0
    commit_requests: int = 0
    steps: int = 0
    fenced: int = 0
    executions_finished: int = 0
    handed_back: int = 0
    adopted: int = 0  # executions started in this process and handed over in memory
    resumed: int = 0  # turns resumed from a kept continuation, without a replay


class Worker:
    """Runs the workflows of ``engine`` until :meth:`stop` (or a signal via run_worker)."""

    def __init__(self, engine: Engine, options: WorkerOptions | None = None) -> None:
        self.engine = engine
        self.options = options or WorkerOptions()
        self.worker_id = self.options.worker_id or default_worker_id()
        self.hooks = HookChain(engine.hooks)
        self.stats = WorkerStats()
        #: What this worker's presence beat last learned (``raftflow workers``, metrics).
        self.presence = PresenceState()
        self._stop_requested = threading.Event()
        self._runs: list[WorkerRun] = []  # one per cluster while it runs
        self._round_trips = 0

    @property
    def round_trips(self) -> int:
        """HTTP requests (or SQLite requests) this worker has sent so far."""
        runs = self._runs
        return sum(run.round_trips for run in runs) if runs else self._round_trips

    @property
    def running(self) -> int | None:
        """How many executions it runs now; None while it does not run."""
        runs = self._runs
        return sum(run.running() for run in runs) if runs else None

    @property
    def leases_held(self) -> int:
        """How many of the executions it runs hold their lease now (0 while it does not run)."""
        return sum(len(run.dispatch.held_leases()) for run in self._runs)

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`stop` was called (the run drains, then returns)."""
        return self._stop_requested.is_set()

    def stop(self) -> None:
        """Stop claiming, let running steps finish (``drain_timeout``), then return from
        :meth:`run`. Thread-safe; called before :meth:`run`, that run returns at once."""
        self._stop_requested.set()
        for run in self._runs:
            run.request_stop()

    async def run(self, *, on_ready: Callable[[], None] | None = None) -> None:
        """Work until :meth:`stop` is called (sharded: on every cluster of the engine, a run
        of its own on each, with ``concurrency`` slots each)."""
        if self._stop_requested.is_set():
            self._stop_requested.clear()
            log.info("worker %s: stop() was called before run(); not starting", self.worker_id)
            if on_ready is not None:
                on_ready()
            return
        runs = self._runs_on(self.engine.shards)
        self._runs = runs
        if self._stop_requested.is_set():  # stop() ran between the check and the assignment
            for run in runs:
                run.request_stop()
        ready = len(runs)

        def one_ready() -> None:
            nonlocal ready
            ready -= 1
            if ready == 0:
                self.hooks.worker_started(self)
                if on_ready is not None:
                    on_ready()

        tasks = [asyncio.create_task(run.run(one_ready)) for run in runs]
        try:
            done, _pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            if any(task.exception() is not None for task in done):
                for run in runs:  # one run cannot go on: the worker stops on every cluster
                    run.request_stop()
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._round_trips = sum(run.round_trips for run in runs)
            self._runs = []
            self._stop_requested.clear()
            if ready == 0:
                self.hooks.worker_stopped(self)

    def _runs_on(self, shards: Shards) -> list[WorkerRun]:
        """A run per cluster, each with its own connection, slots, committer and duties
        (its schedules: those whose workflow's name routes to its cluster)."""
        from raftflow.engine.runtime.host import Definitions, WorkerContext
        from raftflow.engine.runtime.lanes import ServedLanes
        from raftflow.engine.runtime.run import Served, WorkerRun

        engine = self.engine
        lanes = ServedLanes(engine.registry, self.options.queues, engine.schedules)
        definitions = Definitions(engine.registry, engine.max_payload_bytes, engine.max_history)
        split = any(shard.store.queue is not None for shard in shards)
        if split and any(schedule.lane in lanes for schedule in engine.schedules.values()):
            raise ConfigurationError(
                "schedules need the queue and the store on one database (a schedule's fire "
                "is fenced by its message's lease)"
            )
        pairs = {}
        for shard in shards:
            transport = shard.transport.to_async()
            pairs[shard.name] = (transport, shard.store.to_async(transport))

        def elsewhere_of(name: str) -> Callable[[str], AsyncStore | None]:
            def elsewhere(execution_id: str) -> AsyncStore | None:
                holder = shards.of(execution_id).name
                return None if holder == name else pairs[holder][1]

            return elsewhere

        context = WorkerContext(self.worker_id, self.options, self.stats, self.hooks)
        runs = []
        for shard in shards:
            schedules = {
                name: schedule
                for name, schedule in engine.schedules.items()
                if schedule.lane in lanes and shards.of(SCHEDULE_PREFIX + name) is shard
            }
            served = Served(
                definitions=definitions,
                lanes=lanes,
                schedules=schedules,
                retention=engine.retention,
                local=engine.local,
                presence=self.presence,
            )
            transport, store = pairs[shard.name]
            runs.append(
                WorkerRun(
                    context,
                    served=served,
                    transport=transport,
                    store=store,
                    shard=shard.name,
                    elsewhere=elsewhere_of(shard.name),
                    clusters=len(shards),
                )
            )
        return runs


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
