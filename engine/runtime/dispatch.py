"""One claimed event: what happens to an execution is decided here, and only here.

An event of an execution that is gone or finished is acked; one of an execution to cancel
(asked, inherited, or past its workflow's ``timeout``) ends it, between two steps; one of a
workflow this worker does not know is parked; otherwise the run goes on -- resumed from
the run cache when the claim finds nothing changed since this worker's last turn, else
replayed from its records. A schedule's message fires the schedule. A failure outside user
code is logged, never an outcome: the execution is handed back, with a back-off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from raftflow.engine.runtime.host import RunHost
from raftflow.engine.runtime.runcache import RunCache
from raftflow.engine.runtime.schedules import ScheduleFlows
from raftflow.engine.shards.partitions import key_route
from raftflow.engine.workflow.activation import Activation
from raftflow.engine.workflow.drivers import run_async, run_sync
from raftflow.engine.workflow.events import RunEvent, parse_event
from raftflow.engine.workflow.registry import WorkflowDef
from raftflow.engine.workflow.schedule import Schedule, is_engine_group, parse_schedule_event
from raftflow.stores.commit import Commit
from raftflow.stores.records import Claimed, Status
from raftflow.stores.rows import cancelled_error
from raftflow.transports.contract import Lease

if TYPE_CHECKING:
    from raftflow.engine.runtime.worker import WorkerOptions

log = logging.getLogger("raftflow.worker")

#: Longest back-off before an execution handed back after a failure is claimable again.
MAX_HAND_BACK_DELAY = 30.0


class Dispatcher:
    """Handles the claimed events of one worker run (each in a task of its own)."""

    def __init__(
        self,
        host: RunHost,
        options: WorkerOptions,
        schedules: dict[str, Schedule],
        runs: RunCache,
        pool: ThreadPoolExecutor,
    ) -> None:
        self.host = host
        self.options = options
        self.schedules = schedules
        self.runs = runs
        self.pool = pool
        self.transport, self.store = host.transport, host.store
        self.schedule_flows = ScheduleFlows(host.store.clock)
        # Insertion-ordered (a dict, not a set): the heartbeat extends, and the drain
        # releases, in claim order, not in an order of memory addresses (tests/sim).
        self.activations: dict[Activation, None] = {}
        self._runs: set[asyncio.Task[None]] = set()  # async runs (they outlive a turn)

    async def handle(self, claimed: Claimed) -> None:
        """One claimed event, between the turn hooks (this task is the turn's)."""
        record = claimed.execution
        if record is None and is_engine_group(claimed.lease.group_id):
            await self._fire_schedule(claimed.lease)
            return
        if record is None or record.status.is_final:
            await self._handle_event(claimed)
            return
        self.host.hooks.turn_started(record)
        try:
            await self._handle_event(claimed)
        finally:
            self.host.hooks.turn_ended(record)

    async def _handle_event(self, claimed: Claimed) -> None:
        lease, record = claimed.lease, claimed.execution
        try:
            if record is None or record.status.is_final:
                # An event for an execution that is gone or finished: nothing to run.
                await self.transport.ack_leases([lease])
                return
            reason = record.cancel_reason
            deadline = record.deadline
            if reason is None and deadline is not None and self.host.clock_earliest() >= deadline:
                reason = "timeout"
            if reason is not None:
                # A cancel (asked, inherited from a parent, or the workflow's timeout) is
                # done here, between two steps: the event ends the execution.
                await self._cancel(lease, reason)
                return
            event = parse_event(lease.event)
            workflow = self.host.registry.workflows.get(record.workflow)
            if workflow is None or event is None:
                what = (
                    f"workflow {record.workflow!r} is not registered here"
                    if workflow is None
                    else f"event {lease.event!r} is of an unknown kind"
                )
                await self._park_unknown(lease, f"execution {record.id}: {what}")
                return
            if isinstance(event, RunEvent):
                last = -1 if record.last_idx is None else record.last_idx
                if last < 0 and await self._rate_limited(lease, workflow):
                    return  # nothing recorded yet: it begins now, or waits for its time
                kept = self.runs.take(record.id)
                if kept is not None:
                    if kept.fingerprint() == (record.commit_id, last) and kept.workflow is workflow:
                        self.host.stats.resumed += 1
                        kept.resume(claimed)
                        await self._turn(kept)
                        return
                    kept.discard()  # another worker ran it meanwhile: replay
                if len(claimed.steps) <= last:  # a long history: read the rest in pages
                    steps = await self.store.history(record.id, claimed.steps, last)
                    claimed = replace(claimed, steps=steps)
                activation = Activation(self.host, workflow, claimed)
                activation.turn = self.host.loop.create_future()
                if activation.is_async:
                    self._start_task(run_async(activation))
                else:
                    self.pool.submit(run_sync, activation)
                await self._turn(activation)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("execution %s: the worker failed to run it", lease.group_id)
            await self.hand_back(lease, exc)

    async def _rate_limited(self, lease: Lease, workflow: WorkflowDef) -> bool:
        """An execution of a rate-limited queue about to begin: its start time reserved
        (idempotent by its id: the claim after a park finds the same), and parked until
        then if it is ahead. Its history is untouched: a replay never meets the limit."""
        rate = self.host.registry.queue_rates.get(workflow.queue)
        if rate is None:
            return False
        key = f"queue:{workflow.queue}"
        flow = self.store.flows.reserve_rate(key, lease.group_id, rate.limit, rate.per)
        wait = await self.host.run_flow(flow, key_route(key)) - self.host.clock_earliest()
        if wait <= 0:
            return False
        await self.transport.release_leases([lease], wait)
        return True

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
            self.runs.keep(activation)
        if activation.failure is not None:
            await self.hand_back(activation.lease, activation.failure)

    def _start_task(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = self.host.loop.create_task(coroutine)
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)

    async def _cancel(self, lease: Lease, reason: str) -> None:
        commit = Commit(
            execution_id=lease.group_id,
            lease_seq=lease.seq,
            lease_token=lease.token,
            worker_id=self.host.worker_id,
            status=Status.CANCELLED,
            error=cancelled_error(reason),
        )
        outcome = await self.host.commit(commit)
        if outcome.applied:
            log.info("execution %s cancelled (%s)", lease.group_id, reason)
            self.host.finished(lease.group_id, Status.CANCELLED)

    async def _park_unknown(self, lease: Lease, what: str) -> None:
        """An event this worker cannot run: parked for ``park_unknown`` seconds."""
        log.error("%s; parked for %gs", what, self.options.park_unknown)
        await self.transport.release_leases([lease], self.options.park_unknown)

    async def _fire_schedule(self, lease: Lease) -> None:
        """A schedule's message came due: start its due times' executions and park it until
        its next time, in one fenced statement."""
        try:
            event = parse_schedule_event(lease.event)
            schedule = None if event is None else self.schedules.get(event.workflow)
            registry = self.host.registry
            definition = None if schedule is None else registry.workflows.get(schedule.workflow)
            if event is None or schedule is None or definition is None:
                await self._park_unknown(lease, f"schedule {lease.group_id} is not registered here")
                return
            lane = registry.lane(definition)
            flow = self.schedule_flows.fire(lease, schedule, definition, lane, event.at)
            outcome = await self.store.run(flow)
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
            await self.hand_back(lease, exc)

    async def hand_back(self, lease: Lease, cause: BaseException) -> None:
        """Give an execution back after a failure outside user code, with a back-off that
        grows with the claims of its event (a failure that repeats does not spin)."""
        delay = min(
            self.options.retry_delay * 2 ** min(lease.attempts - 1, 16), MAX_HAND_BACK_DELAY
        )
        try:
            await self.transport.release_group(lease.group_id, lease.token, delay)
            self.host.stats.handed_back += 1
        except Exception as exc:  # its lease lapses instead
            log.warning(
                "execution %s: hand-back after %s failed too (%s); its lease will lapse",
                lease.group_id,
                type(cause).__name__,
                exc,
            )

    def held_leases(self) -> list[Lease]:
        """The leases of runs in a turn that still hold them (the drain gives them back)."""
        return [a.lease for a in self.activations if a.held]
