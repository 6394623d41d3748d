"""One run of a worker: the claim loop, the event dispatch, the heartbeat and the drain.

One asyncio loop does all the I/O: the claim loop, the heartbeat and the committer
(:mod:`raftflow.engine.runtime.committer`). Async workflows run as tasks on that loop; sync
workflows run in a thread pool and hand their commits to the loop. Per step, on rqlite,
the hot path costs one HTTP request and one Raft entry (the fenced commit that also acks
and publishes); a claim (one request) is needed only when an execution is picked up, and
at most every ``steps_per_turn`` steps while other executions wait to be claimed, which
keeps service round-robin.

Idle workers poll with a ``weak`` read (no Raft entry), and claim only when it says there
is work. A failure outside user code (the network, rqlite, the clock, a bug of ours) is
logged and never becomes an execution's outcome: the execution is handed back -- free
again after a short back-off -- and runs again, here or elsewhere. At worst a lease lapses
and its event is delivered again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from raftflow.engine.backend import AsyncBackend, Claimed, Commit, CommitOutcome
from raftflow.engine.runtime.committer import Committer
from raftflow.engine.runtime.presence import Presence
from raftflow.engine.runtime.retention import Retention
from raftflow.engine.runtime.schedules import ScheduleFlows, is_engine_group, parse_schedule_event
from raftflow.engine.workflow.activation import Activation, cancelled_error
from raftflow.engine.workflow.drivers import run_async, run_sync
from raftflow.engine.workflow.events import RunEvent, parse_event
from raftflow.engine.workflow.steppath import SHORT_WAIT
from raftflow.stores.contract import ErrorInfo, Status
from raftflow.transports.contract import Lease
from raftflow.transports.db.clock import earliest_estimate, is_virtual, uncertainty_of
from raftflow.transports.db.flow import Flow
from raftflow.transports.payload import from_json

from raftflow.errors import (
    AuthenticationError,
    ConfigurationError,
    ProtocolError,
)

if TYPE_CHECKING:
    from raftflow.engine.runtime.local import LocalWorkers
    from raftflow.engine.runtime.worker import Worker

log = logging.getLogger("raftflow.worker")

#: How long a read of whether other executions wait to be claimed is taken as current
#: (keep_turn), and past what age it no longer counts at all: one weak read (no Raft entry)
#: per WAITING_TTL at most, and only while turns reach ``steps_per_turn``.
WAITING_TTL = 0.1
WAITING_STALE = 1.0

T = TypeVar("T")

#: Errors a worker does not retry: it stops and raises them.
FATAL_ERRORS = (AuthenticationError, ConfigurationError, ProtocolError)
#: Seconds between two checks that the schedules' messages exist (weak reads).
SCHEDULE_CHECK_INTERVAL = 10.0
#: Longest back-off before an execution handed back after a failure is claimable again.
MAX_HAND_BACK_DELAY = 30.0


def resident_mb() -> float:
    """This process's resident memory in MiB (Linux; 0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


class Session:
    """Everything that lives while :meth:`Worker.run` runs; also the activations' Host."""

    def __init__(self, worker: Worker, backend: AsyncBackend) -> None:
        self.worker = worker
        self.options = worker.options
        self.stats = worker.stats
        self.worker_id = worker.worker_id
        self.hooks = worker.hooks
        self.max_payload_bytes = worker.engine.max_payload_bytes
        self.max_history = worker.engine.max_history
        self.backend = backend
        self.store = backend.store
        self.registry = worker.engine.registry
        self.loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        self.slot_freed = asyncio.Event()
        # Insertion-ordered (dicts, not sets): the heartbeat extends, and the drain cancels,
        # in claim order, not in an order of memory addresses (replayable runs, tests/sim).
        self.activations: dict[Activation, None] = {}
        self.tasks: dict[asyncio.Task[None], None] = {}
        self.committer = Committer(
            backend, self.options, self.stats, self.hooks, alone=lambda: len(self.activations) <= 1
        )
        self.presence = Presence(self)
        self.schedules = ScheduleFlows(backend.queue.clock)
        keep = worker.engine.retention
        self.retention = None if keep is None else Retention(self, keep)
        #: Suspended runs kept for their next turn (sticky continuation), by execution id.
        self.continuations: OrderedDict[str, Activation] = OrderedDict()
        self._runs: set[asyncio.Task[None]] = set()  # async runs (they outlive a turn)
        self._reserved = 0  # slots promised to executions started in this process
        self._reserve_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        # Whether another group waited to be claimed, and when that was read (keep_turn).
        self._waiting: tuple[float, bool] | None = None
        self._waiting_read: asyncio.Task[None] | None = None

    @property
    def round_trips(self) -> int:
        return int(getattr(self.backend.database.connection, "round_trips", 0))

    def request_stop(self) -> None:
        """Thread-safe: stop claiming and drain."""
        self.loop.call_soon_threadsafe(self.stopping.set)

    # -- the start fast path (engine/runtime/local.py) ---------------------------------------------

    def reserve(self, priority: int) -> bool:
        """Thread-safe: take a free slot for an execution this process is starting."""
        with self._reserve_lock:
            free = self.options.concurrency - len(self.tasks) - self._reserved
            if free <= 0 or self.stopping.is_set() or priority < self.options.min_priority:
                return False
            self._reserved += 1
            return True

    def unreserve(self) -> None:
        with self._reserve_lock:
            self._reserved -= 1

    def adopt(self, claimed: Claimed) -> None:
        """Thread-safe: run an execution whose first event was published leased to us.
        Until its turn here is over, this process's result() waiters wait for our news."""
        local, execution_id = self.worker.engine.local, claimed.lease.group_id
        local.hold(execution_id, None if claimed.execution is None else claimed.execution.workflow)
        try:
            self.loop.call_soon_threadsafe(self._adopt, claimed)
        except BaseException:  # the loop is closed: nobody will run it here
            local.release(execution_id)
            raise

    def _adopt(self, claimed: Claimed) -> None:
        self.unreserve()
        self.stats.adopted += 1
        assert self._pool is not None
        execution_id = claimed.lease.group_id
        try:
            task = self._spawn(self._pool, claimed)
        except BaseException:
            self.worker.engine.local.release(execution_id)
            raise
        task.add_done_callback(lambda _: self.worker.engine.local.release(execution_id))

    def _spawn(self, pool: ThreadPoolExecutor, claimed: Claimed) -> asyncio.Task[None]:
        task = asyncio.create_task(self._handle(pool, claimed))
        self.tasks[task] = None
        task.add_done_callback(self._task_done)
        return task

    def finished(self, execution_id: str, status: Status) -> None:
        """An execution's outcome committed here: tell the hooks and local result() waiters."""
        self.hooks.after_execution(execution_id, status)
        self.worker.engine.local.finished(execution_id)

    # -- Host: what an activation needs ---------------------------------------------------

    async def commit(self, commit: Commit) -> CommitOutcome:
        local = self.worker.engine.local
        final = commit.status is not None and commit.status.is_final
        # An outcome this process's result() may be waiting for (engine/runtime/local.py): the
        # ticket orders the commit's sending after the waiters already there.
        sent = (
            local.ticket()
            if final and commit.continue_input is None and local.holds(commit.execution_id)
            else None
        )
        outcome = await self.committer.commit(commit)
        if outcome.applied:
            self.stats.commits += 1
            self.stats.steps += commit.step_idx is not None
            self.stats.executions_finished += final
            if sent is not None:
                _hand_over(local, commit, sent)
        else:
            self.stats.fenced += 1
        return outcome

    async def run_flow(self, flow: Flow[T]) -> T:
        return await self.backend.run(flow)

    def clock_estimate(self) -> float:
        return self.backend.queue.clock.estimate()

    def clock_uncertainty(self) -> float:
        return uncertainty_of(self.backend.queue.clock)

    def clock_earliest(self) -> float:
        return earliest_estimate(self.backend.queue.clock)

    def short_wait(self) -> float:
        # Under a virtual clock (engine.testing) time moves only when the test moves it:
        # every wait parks, however short, so that it ends when the clock says so.
        return 0.0 if is_virtual(self.backend.queue.clock) else SHORT_WAIT

    def keep_turn(self, activation: Activation) -> bool:
        """Whether ``activation`` goes on with its next step in this turn (called from the
        thread that runs it). After ``steps_per_turn`` steps it is handed back only if
        another execution waits to be claimed: fairness needs the slot then, and
        otherwise a hand-back buys nothing and costs a claim (a Raft entry, and a wait)."""
        if self.stopping.is_set():
            return False
        if activation.turn_steps + 1 < self.options.steps_per_turn:
            return True
        return not self.options.yield_idle_turns and not self._others_wait()

    def _others_wait(self) -> bool:
        """Whether some group waits to be claimed, as last read; older than WAITING_TTL
        it is read again meanwhile, and unknown (or older than WAITING_STALE) counts as
        no. Not as yes: a read taken just after a hand-back finds the handed-back group
        itself waiting, and every turn would end again (the step after the read decides)."""
        seen, now = self._waiting, self.loop.time()
        if seen is None or now - seen[0] > WAITING_TTL:
            self.loop.call_soon_threadsafe(self._read_waiting)
        return seen is not None and now - seen[0] <= WAITING_STALE and seen[1]

    def _read_waiting(self) -> None:
        if self._waiting_read is None or self._waiting_read.done():
            self._waiting_read = self.loop.create_task(self._read_waiting_now())

    async def _read_waiting_now(self) -> None:
        try:
            ready = await self.backend.run(self.backend.queue.claimable(self.options.min_priority))
        except Exception as exc:  # unknown (a claim would fail too: nobody is kept out)
            log.debug("worker %s: reading the claimable groups failed: %s", self.worker_id, exc)
            self._waiting = None
        else:
            self._waiting = (self.loop.time(), bool(ready))

    # -- the run --------------------------------------------------------------------------

    async def run(self, on_ready: Callable[[], None] | None) -> None:
        worker_id, options = self.worker_id, self.options
        # A sync run keeps its thread while it waits, suspended, for its next turn.
        threads = options.concurrency + options.sticky_cache
        pool = ThreadPoolExecutor(threads, thread_name_prefix="raftflow-workflow")
        self._pool = pool
        committer = asyncio.create_task(self.committer.run(), name="raftflow-committer")
        heartbeat = asyncio.create_task(self._heartbeat(), name="raftflow-heartbeat")
        presence = asyncio.create_task(self.presence.run(), name="raftflow-presence")
        schedules = asyncio.create_task(self._ensure_schedules(), name="raftflow-schedules")
        retention = asyncio.create_task(
            self.retention.run() if self.retention is not None else asyncio.sleep(0),
            name="raftflow-retention",
        )
        log.info("worker %s started (concurrency %d)", worker_id, options.concurrency)
        try:
            await self.backend.run(self.backend.queue.clock.now())  # sync the clock first
            self.hooks.worker_started(self.worker)
            self.worker.engine.local.add(self)
            if on_ready is not None:
                on_ready()
            try:
                await self._claim_loop(pool)
            finally:
                self.worker.engine.local.remove(self)
            await self._drain()
        finally:
            background = [committer, heartbeat, presence, schedules, retention]
            if self._waiting_read is not None:
                background.append(self._waiting_read)
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await self.presence.leave()
            self.hooks.worker_stopped(self.worker)
            for activation in self.continuations.values():
                activation.discard()
            self.continuations.clear()
            pool.shutdown(wait=False, cancel_futures=True)
            await self.backend.close()
            stats = self.stats
            log.info(
                "worker %s stopped: %d steps, %d commits in %d requests, %d claims, %d round trips",
                worker_id,
                stats.steps,
                stats.commits,
                stats.commit_requests,
                stats.claims,
                self.round_trips,
            )

    async def _claim_loop(self, pool: ThreadPoolExecutor) -> None:
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
                    claimable = self.backend.queue.claimable(options.min_priority)
                    if not await self.backend.run(claimable):
                        await self._until(self.stopping, poll)
                        poll = min(poll * 2, options.max_poll_interval)
                        continue
                fingerprints = {eid: a.fingerprint() for eid, a in self.continuations.items()}
                claim = self.backend.flows.claim(
                    self.worker_id, options.visibility, free, options.min_priority, fingerprints
                )
                started = time.perf_counter()
                claimed = await self.backend.run(claim)
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
                poll = min(poll * 2, options.max_poll_interval)
                continue
            poll = options.poll_interval
            for item in claimed:
                self._spawn(pool, item)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self.tasks.pop(task, None)
        self.slot_freed.set()

    async def _until(self, event: asyncio.Event, timeout: float | None) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    # -- one event: what happens to an execution is decided here, and only here -----------

    async def _handle(self, pool: ThreadPoolExecutor, claimed: Claimed) -> None:
        """One claimed event, between the turn hooks (this task is the turn's)."""
        record = claimed.execution
        if record is None and is_engine_group(claimed.lease.group_id):
            await self._fire_schedule(claimed.lease)
            return
        if record is None or record.status.is_final:
            await self._handle_event(pool, claimed)
            return
        self.hooks.turn_started(record)
        try:
            await self._handle_event(pool, claimed)
        finally:
            self.hooks.turn_ended(record)

    async def _handle_event(self, pool: ThreadPoolExecutor, claimed: Claimed) -> None:
        lease, record = claimed.lease, claimed.execution
        try:
            if record is None or record.status.is_final:
                # An event for an execution that is gone or finished: nothing to run.
                await self.backend.run(self.backend.flows.ack([lease]))
                return
            reason = record.cancel_reason
            deadline = record.deadline
            surely = self.clock_earliest()
            if reason is None and deadline is not None and surely >= deadline:
                reason = "timeout"
            if reason is not None:
                # A cancel (asked, inherited from a parent, or the workflow's timeout) is
                # done here, between two steps: the event ends the execution.
                await self._cancel(lease, reason)
                return
            event = parse_event(lease.event)
            workflow = self.worker.engine.registry.workflows.get(record.workflow)
            if workflow is None or event is None:
                what = (
                    f"workflow {record.workflow!r} is not registered here"
                    if workflow is None
                    else f"event {lease.event!r} is of an unknown kind"
                )
                log.error(
                    "execution %s: %s; parked for %gs", record.id, what, self.options.park_unknown
                )
                await self.backend.run(
                    self.backend.flows.release([lease], self.options.park_unknown)
                )
                return
            if isinstance(event, RunEvent):
                last = -1 if record.last_idx is None else record.last_idx
                kept = self.continuations.pop(record.id, None)
                if kept is not None:
                    if kept.fingerprint() == (record.commit_id, last) and kept.workflow is workflow:
                        self.stats.resumed += 1
                        kept.resume(claimed)
                        await self._turn(kept)
                        return
                    kept.discard()  # another worker ran it meanwhile: replay
                if len(claimed.steps) <= last:  # a long history: read the rest in pages
                    flow = self.backend.flows.history(record.id, claimed.steps, last)
                    claimed = replace(claimed, steps=await self.backend.run(flow))
                activation = Activation(self, workflow, claimed)
                activation.turn = self.loop.create_future()
                if activation.is_async:
                    self._start_task(run_async(activation))
                else:
                    pool.submit(run_sync, activation)
                await self._turn(activation)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("execution %s: the worker failed to run it", lease.group_id)
            await self._hand_back(lease, exc)

    # -- schedules (engine/runtime/schedules.py) ---------------------------------------------------

    async def _ensure_schedules(self) -> None:
        """Make sure the schedules this engine registers have their message: all of them
        when the worker starts (retried until it works: the cluster may have no leader
        yet), then, every beat, any that a weak read finds gone."""
        schedules = list(self.worker.engine.schedules.values())
        pending = schedules
        while schedules:
            try:
                if pending:
                    await self.backend.run(self.schedules.ensure(pending))
                await asyncio.sleep(SCHEDULE_CHECK_INTERVAL)
                pending = await self.backend.run(self.schedules.missing(schedules))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("worker %s: schedules not ensured yet: %s", self.worker_id, exc)
                await asyncio.sleep(self.options.retry_delay)

    async def _fire_schedule(self, lease: Lease) -> None:
        """A schedule's message came due: start its due times' executions and park it until
        its next time, in one fenced statement."""
        try:
            event = parse_schedule_event(lease.event)
            schedule = None if event is None else self.worker.engine.schedules.get(event.workflow)
            definition = (
                None if schedule is None else self.registry.workflows.get(schedule.workflow)
            )
            if event is None or schedule is None or definition is None:
                log.error(
                    "schedule %s is not registered here; parked for %gs",
                    lease.group_id,
                    self.options.park_unknown,
                )
                await self.backend.run(
                    self.backend.flows.release([lease], self.options.park_unknown)
                )
                return
            outcome = await self.backend.run(
                self.schedules.fire(lease, schedule, definition, event.at)
            )
            if outcome.skipped:
                log.warning(
                    "schedule %s: missed times older than the last %d were skipped (catch_up)",
                    schedule.workflow,
                    schedule.catch_up,
                )
            if outcome.applied:
                log.info("schedule %s started %s", schedule.workflow, ", ".join(outcome.started))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("schedule %s: the worker failed to fire it", lease.group_id)
            await self._hand_back(lease, exc)

    async def _turn(self, activation: Activation) -> None:
        """One turn of a run: until it ends ("done") or waits for its next ("suspended",
        kept in memory, holding no slot, to be resumed without a replay)."""
        assert activation.turn is not None
        self.activations[activation] = None
        try:
            how = await activation.turn
        finally:
            self.activations.pop(activation, None)
        if how == "suspended":
            self._keep(activation)
        if activation.failure is not None:
            await self._hand_back(activation.lease, activation.failure)

    def _keep(self, activation: Activation) -> None:
        """Keep a suspended run, least recently used out first (its run then unwinds)."""
        # A run whose thread suspended late (after the worker claimed its next event and
        # started a replay of it) may find that replay kept under its id: the one put
        # aside unwinds, or its thread would wait forever.
        displaced = self.continuations.pop(activation.execution_id, None)
        if displaced is not None and displaced is not activation:
            displaced.discard()
        self.continuations[activation.execution_id] = activation
        limit_mb = self.options.sticky_cache_mb
        while len(self.continuations) > self.options.sticky_cache or (
            limit_mb is not None and self.continuations and resident_mb() > limit_mb
        ):
            _, oldest = self.continuations.popitem(last=False)
            oldest.discard()

    def _start_task(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = self.loop.create_task(coroutine)
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)

    @property
    def sticky(self) -> bool:
        return self.options.sticky_cache > 0

    async def _cancel(self, lease: Lease, reason: str) -> None:
        commit = Commit(
            execution_id=lease.group_id,
            lease_seq=lease.seq,
            lease_token=lease.token,
            worker_id=self.worker_id,
            status=Status.CANCELLED,
            error=cancelled_error(reason),
        )
        outcome = await self.commit(commit)
        if outcome.applied:
            log.info("execution %s cancelled (%s)", lease.group_id, reason)
            self.finished(lease.group_id, Status.CANCELLED)

    async def _hand_back(self, lease: Lease, cause: BaseException) -> None:
        """Give an execution back after a failure outside user code, with a back-off that
        grows with the claims of its event (a failure that repeats does not spin)."""
        delay = min(
            self.options.retry_delay * 2 ** min(lease.attempts - 1, 16), MAX_HAND_BACK_DELAY
        )
        try:
            await self.backend.run(self.backend.flows.hand_back(lease.group_id, lease.token, delay))
            self.stats.handed_back += 1
        except Exception as exc:  # its lease lapses instead
            log.warning(
                "execution %s: hand-back after %s failed too (%s); its lease will lapse",
                lease.group_id,
                type(cause).__name__,
                exc,
            )

    # -- keeping leases alive -------------------------------------------------------------

    async def _heartbeat(self) -> None:
        """Renew the leases of long steps, all in one request per beat. Never dies: a
        failed beat is logged and the next one tries again."""
        visibility = self.options.visibility
        while True:
            await asyncio.sleep(visibility / 4)
            try:
                await self._beat(visibility)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("worker %s: heartbeat failed: %s", self.worker_id, exc)

    async def _beat(self, visibility: float) -> None:
        horizon = self.clock_estimate() + visibility / 2
        due = [
            (a, a.lease, a.commits)
            for a in self.activations
            if a.held and not a.committing and a.lease.expires_at < horizon
        ]
        if not due:
            return
        renewed = await self.backend.run(
            self.backend.flows.extend([lease for _, lease, _ in due], visibility)
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

    async def _drain(self) -> None:
        if not self.tasks:
            return
        log.info("worker %s draining %d executions", self.worker_id, len(self.tasks))
        _done, pending = await asyncio.wait(set(self.tasks), timeout=self.options.drain_timeout)
        held = [a.lease for a in self.activations if a.held]
        for task in [t for t in self.tasks if t in pending]:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=1.0)
        if held:  # steps still running at the deadline: free their executions now
            with contextlib.suppress(Exception):
                await self.backend.run(self.backend.flows.release(held))


def _hand_over(local: LocalWorkers, commit: Commit, sent: int) -> None:
    """The applied commit of an outcome, to this process's result() waiters."""
    assert commit.status is not None
    if commit.status is Status.SUCCEEDED and commit.output is not None:
        local.settled(commit.execution_id, sent, commit.status, from_json(commit.output), None)
    elif commit.status is not Status.SUCCEEDED and commit.error is not None:
        error = ErrorInfo.from_json(from_json(commit.error))
        local.settled(commit.execution_id, sent, commit.status, None, error)
    # else: the stored output or error is an earlier commit's (COALESCE): read it
