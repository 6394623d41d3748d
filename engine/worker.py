"""The worker: claims executions' events, runs their workflows, commits their steps.

One asyncio loop does all the I/O: the claim loop, the heartbeat and the committer. Async
workflows run as tasks on that loop; sync workflows run in a thread pool and hand their
commits to the loop. Per step, on rqlite, the hot path costs one HTTP request and one Raft
entry (the fenced commit that also acks and publishes, :mod:`raftflow.stores.ops`); a claim (one
request) is needed only when an execution is picked up, and at most every
``steps_per_turn`` steps, which keeps service round-robin. The committer sends every
commit that is waiting as one request (group commit): N executions advancing at once cost
one Raft entry, not N.

Idle workers poll with a ``weak`` read (no Raft entry), and claim only when it says there
is work. Connection failures are logged and retried with a delay; a worker never drops an
event -- at worst its lease lapses and the event is delivered again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from raftflow.engine.activation import Activation
from raftflow.engine.events import parse_event
from raftflow.engine.hooks import HookChain
from raftflow.stores.base import ExecutionRecord, StepRecord
from raftflow.stores.ops import Commit, CommitOutcome, StoreFlows, commit_request, outcomes_from
from raftflow.transports.base import Lease
from raftflow.transports.db import AsyncConnection, adrive
from raftflow.transports.errors import (
    AuthenticationError,
    ConfigurationError,
    ProtocolError,
    RaftflowError,
)
from raftflow.transports.queue import QueueFlows

if TYPE_CHECKING:
    from raftflow.engine.app import Engine

log = logging.getLogger("raftflow.worker")

#: Errors a worker does not retry: it stops and raises them.
FATAL_ERRORS = (AuthenticationError, ConfigurationError, ProtocolError)


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker runs. Every field has a default that suits a small cluster."""

    concurrency: int = 4
    worker_id: str | None = None
    min_priority: int = 0
    visibility: float = 30.0  # lease length; the heartbeat renews it for long steps
    steps_per_turn: int = 16  # steps run without a new claim before yielding the turn
    poll_interval: float = 0.01  # first idle poll delay, doubling up to max_poll_interval
    max_poll_interval: float = 0.1  # idle polls are weak reads: no Raft entry
    drain_timeout: float = 30.0  # on stop: how long running steps may take to finish
    park_unknown: float = 60.0  # how long an event this worker cannot run stays parked
    max_batch: int = 64  # commits per request at most
    # Commit requests in flight at once. 1 measured best on rqlite (bench/, docs/
    # performance.md): rqlite is CPU-bound, and more requests only split the batches.
    max_inflight: int = 1
    retry_delay: float = 0.5  # after a failed claim


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
    extra: dict[str, int] = field(default_factory=dict)


class Worker:
    """Runs the workflows of ``engine`` until :meth:`stop` (or a signal via run_worker)."""

    def __init__(self, engine: Engine, options: WorkerOptions | None = None) -> None:
        self.engine = engine
        self.options = options or WorkerOptions()
        if self.options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.worker_id = self.options.worker_id or default_worker_id()
        self.max_payload_bytes = engine.max_payload_bytes
        self.hooks = HookChain(engine.hooks)
        self.stats = WorkerStats()
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._stopping: asyncio.Event | None = None
        self._slot_freed: asyncio.Event | None = None
        self._activations: set[Activation] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._committer: Committer | None = None
        self._queue: QueueFlows = None  # type: ignore[assignment]
        self._conn: AsyncConnection = None  # type: ignore[assignment]

    # -- the Runtime an Activation sees ---------------------------------------------------

    async def commit(self, commit: Commit) -> CommitOutcome:
        assert self._committer is not None
        outcome = await self._committer.commit(commit)
        if outcome.applied:
            self.stats.commits += 1
            if commit.step_idx is not None:
                self.stats.steps += 1
            if commit.status is not None and commit.status.is_final:
                self.stats.executions_finished += 1
        else:
            self.stats.fenced += 1
        return outcome

    @property
    def round_trips(self) -> int:
        """HTTP requests (or SQLite requests) this worker has sent so far."""
        return int(getattr(self._conn, "round_trips", 0)) if self._conn is not None else 0

    def clock_estimate(self) -> float:
        return self._queue.clock.estimate()

    def keep_turn(self, activation: Activation) -> bool:
        stopping = self._stopping is not None and self._stopping.is_set()
        return not stopping and activation.turn_steps + 1 < self.options.steps_per_turn

    # -- lifecycle ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming, let running steps finish (``drain_timeout``), then return."""
        if self._stopping is not None:
            self.loop.call_soon_threadsafe(self._stopping.set)

    async def run(self, *, on_ready: Callable[[], None] | None = None) -> None:
        """Work until :meth:`stop` is called."""
        self.loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._slot_freed = asyncio.Event()
        transport, store = self.engine._async_backend()
        self._conn = transport.connection
        self._queue = transport.flows
        self._committer = Committer(self._conn, self._queue, self.options, self.stats)
        pool = ThreadPoolExecutor(
            max_workers=self.options.concurrency, thread_name_prefix="raftflow-workflow"
        )
        committer = asyncio.create_task(self._committer.run(), name="raftflow-committer")
        heartbeat = asyncio.create_task(self._heartbeat(), name="raftflow-heartbeat")
        log.info("worker %s started (concurrency %d)", self.worker_id, self.options.concurrency)
        try:
            await adrive(self._conn, self._queue.clock.now())  # sync the clock first
            if on_ready is not None:
                on_ready()
            await self._claim_loop(pool)
            await self._drain()
        finally:
            for task in (committer, heartbeat):
                task.cancel()
            await asyncio.gather(committer, heartbeat, return_exceptions=True)
            pool.shutdown(wait=False, cancel_futures=True)
            await transport.close()
            if store.connection is not transport.connection:
                await store.close()
            log.info(
                "worker %s stopped: %d steps, %d commits in %d requests, %d claims, %d round trips",
                self.worker_id,
                self.stats.steps,
                self.stats.commits,
                self.stats.commit_requests,
                self.stats.claims,
                self.round_trips,
            )

    async def _claim_loop(self, pool: ThreadPoolExecutor) -> None:
        assert self._stopping is not None and self._slot_freed is not None
        options = self.options
        poll = options.poll_interval
        idle = True
        while not self._stopping.is_set():
            free = options.concurrency - len(self._tasks)
            if free <= 0:
                self._slot_freed.clear()
                await self._until(self._slot_freed, None)
                continue
            try:
                if idle:
                    self.stats.polls += 1
                    if not await adrive(self._conn, self._queue.claimable(options.min_priority)):
                        await self._until(self._stopping, poll)
                        poll = min(poll * 2, options.max_poll_interval)
                        continue
                claimed = await self._claim(free)
            except FATAL_ERRORS:
                raise  # retrying cannot help: credentials, permissions, a bug
            except RaftflowError as exc:
                log.warning("worker %s: claim failed, retrying: %s", self.worker_id, exc)
                await self._until(self._stopping, options.retry_delay)
                continue
            idle = len(claimed) < free
            if not claimed:
                self.stats.empty_claims += 1
                await self._until(self._stopping, poll)
                poll = min(poll * 2, options.max_poll_interval)
                continue
            poll = options.poll_interval
            for lease, record, steps in claimed:
                task = asyncio.create_task(self._activate(pool, lease, record, steps))
                self._tasks.add(task)
                task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        assert self._slot_freed is not None
        self._slot_freed.set()

    async def _until(self, event: asyncio.Event, timeout: float | None) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    async def _claim(
        self, limit: int
    ) -> list[tuple[Lease, ExecutionRecord | None, list[StepRecord]]]:
        """One request: lease up to ``limit`` events, mark them running, read their state."""
        token = f"{self.worker_id}:{uuid.uuid4().hex}"
        now = await adrive(self._conn, self._queue.clock.now())
        request = self._queue.claim_request(
            token, now, now + self.options.visibility, limit, self.options.min_priority
        ) + StoreFlows.claim_context(token, now)
        response = (await self._conn.send(request)).raise_for_errors()
        leases = self._queue.leases_from(response, token, track=False)
        executions, steps = StoreFlows.context_from(response)
        self.stats.claims += 1
        self.stats.claimed += len(leases)
        return [(le, executions.get(le.group_id), steps.get(le.group_id, [])) for le in leases]

    async def _activate(
        self,
        pool: ThreadPoolExecutor,
        lease: Lease,
        record: ExecutionRecord | None,
        steps: list[StepRecord],
    ) -> None:
        try:
            if record is None or record.status.is_final:
                # An event for an execution that is gone or finished: nothing to run.
                response = await self._conn.send(self._queue.ack_request([lease]))
                response.raise_for_errors()
                return
            workflow = self.engine.registry.workflows.get(record.workflow)
            if workflow is None or parse_event(lease.event) is None:
                what = (
                    f"workflow {record.workflow!r} is not registered here"
                    if workflow is None
                    else f"event {lease.event!r} is of an unknown kind"
                )
                log.error(
                    "execution %s: %s; parked for %gs",
                    record.id,
                    what,
                    self.options.park_unknown,
                )
                await self._park(lease, self.options.park_unknown)
                return
            activation = Activation(self, workflow, lease, record, steps)
            self._activations.add(activation)
            try:
                if workflow.is_async:
                    await activation.run_async()
                else:
                    await self.loop.run_in_executor(pool, activation.run_sync)
            finally:
                self._activations.discard(activation)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The lease lapses and another worker (or this one) runs the event again.
            log.exception("execution %s: the worker failed to run it", lease.group_id)

    async def _park(self, lease: Lease, delay: float) -> None:
        now = await adrive(self._conn, self._queue.clock.now())
        response = await self._conn.send(self._queue.release_request([lease], now, delay))
        response.raise_for_errors()

    async def _heartbeat(self) -> None:
        """Renew the leases of long steps, all in one request per beat."""
        visibility = self.options.visibility
        while True:
            await asyncio.sleep(visibility / 4)
            try:
                now = await adrive(self._conn, self._queue.clock.now())
                due = [
                    (a, a.lease, a.commits)
                    for a in self._activations
                    if a.held and not a.committing and a.lease.expires_at - now < visibility / 2
                ]
                if not due:
                    continue
                request = self._queue.extend_request(
                    [lease for _, lease, _ in due], now, visibility
                )
                response = await self._conn.send(request)
            except RaftflowError as exc:
                log.warning("worker %s: heartbeat failed: %s", self.worker_id, exc)
                continue
            for (activation, lease, commits), result in zip(due, response.results):
                if activation.commits != commits or activation.lease.seq != lease.seq:
                    continue  # it committed meanwhile: the commit renewed its lease
                if result.error is None and result.rows_affected == 1:
                    activation.lease = replace(activation.lease, expires_at=now + visibility)
                else:
                    activation.held = False
                    log.warning(
                        "execution %s: lease lost during a step; its result will be refused",
                        activation.execution_id,
                    )

    async def _drain(self) -> None:
        if not self._tasks:
            return
        log.info("worker %s draining %d executions", self.worker_id, len(self._tasks))
        _done, pending = await asyncio.wait(set(self._tasks), timeout=self.options.drain_timeout)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)


class Committer:
    """Group commit: every commit waiting when a request can go goes in that request.

    A batch is one statement (:func:`raftflow.stores.ops.commit_request`). ``max_inflight``
    requests may be in flight at once (1 by default: more only split the batches while
    rqlite is CPU-bound). Each execution has at most one commit waiting at a time, so
    concurrent requests never reorder an execution's commits.
    """

    def __init__(
        self,
        connection: AsyncConnection,
        queue: QueueFlows,
        options: WorkerOptions,
        stats: WorkerStats,
    ) -> None:
        self._conn = connection
        self._queue = queue
        self._options = options
        self._stats = stats
        self._pending: list[tuple[Commit, asyncio.Future[CommitOutcome]]] = []
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(options.max_inflight)
        self._flushes: set[asyncio.Task[None]] = set()

    async def commit(self, commit: Commit) -> CommitOutcome:
        future: asyncio.Future[CommitOutcome] = asyncio.get_running_loop().create_future()
        self._pending.append((commit, future))
        self._wake.set()
        return await future

    async def run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self._pending:
                    await self._slots.acquire()
                    batch = self._pending[: self._options.max_batch]
                    del self._pending[: len(batch)]
                    if not batch:
                        self._slots.release()
                        break
                    task = asyncio.create_task(self._flush_then_release(batch))
                    self._flushes.add(task)
                    task.add_done_callback(self._flushes.discard)
        finally:
            for task in self._flushes:
                task.cancel()

    async def _flush_then_release(
        self, batch: Sequence[tuple[Commit, asyncio.Future[CommitOutcome]]]
    ) -> None:
        try:
            await self._flush(batch)
        finally:
            self._slots.release()

    async def _flush(self, batch: Sequence[tuple[Commit, asyncio.Future[CommitOutcome]]]) -> None:
        try:
            now = await adrive(self._conn, self._queue.clock.now())
            expiry = now + self._options.visibility
            commits = [
                replace(c, now=now, next_expiry=expiry if c.next_token else None) for c, _ in batch
            ]
            response = await self._conn.send(commit_request(commits))
            self._stats.commit_requests += 1
            outcomes = outcomes_from(response, commits)
            if response[0].error is not None and len(commits) > 1:
                # Not a lease lost (that skips a row): an error that failed the whole
                # statement. Send the commits one by one so only the culprit fails.
                outcomes = []
                for commit in commits:
                    single = await self._conn.send(commit_request([commit]))
                    self._stats.commit_requests += 1
                    outcomes.extend(outcomes_from(single, [commit]))
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), outcome in zip(batch, outcomes):
            if not future.done():
                future.set_result(outcome)


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
