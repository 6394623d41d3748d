"""Cron schedules: a workflow started once per scheduled time, cluster-wide.

A schedule is **one message in its own queue group** (``"raftflow:schedule:<workflow>"``),
parked until its next fire time: while it waits it holds no worker and costs no Raft entry.
When the time comes, whichever worker claims it (the queue leases it to one worker at a
time) inserts one row into the ``schedule_fires`` view; its trigger checks the lease,
starts the execution of each due time with the id ``"<workflow>@<ISO time>"`` and parks
the message again until the next time -- one statement, one Raft entry. Exactly once
follows from two facts: the id of a time's execution is unique (a start that finds it
does nothing), and the message is leased (a worker that lost its lease changes nothing).

After a time when no worker ran, the claim finds the message due since its parked time:
the worker starts the latest due time and up to ``catch_up`` earlier missed ones (most
recent first); older missed times are skipped and logged. The times come from the
cluster's clock (:mod:`raftflow.transports.db.clock`), the cron arithmetic from ``croniter``.

Costs, per schedule: 0 Raft entries while waiting; 2 per fire time (the claim, the fire);
1 per worker start (``ensure``: the message is inserted if missing, re-parked if the code
changed its expression). Each worker then checks every 10 s, with a weak read (no Raft
entry), that its schedules' messages exist, and makes any that is gone again (removed
while a worker still registers it, or acked by a worker of the release before schedules,
which takes it for an event of a deleted execution).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

from raftflow.engine.workflow.events import RUN_TEXT
from raftflow.engine.workflow.schedule import (
    SCHEDULE_PREFIX,
    Schedule,
    parse_schedule_event,
)
from raftflow.stores.lanes import LIVE_WITHIN, lanes_of, serves
from raftflow.stores.lanes import QUERIES as LANES
from raftflow.transports.contract import Lease
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock, surely_after
from raftflow.transports.db.flow import Flow, ReadLevel, Request
from raftflow.transports.payload import to_json

if TYPE_CHECKING:
    from raftflow.engine.workflow.registry import WorkflowDef
    from raftflow.stores.contract import AsyncStore

log = logging.getLogger("raftflow.worker")

#: Seconds between two checks that the schedules' messages exist (weak reads).
SCHEDULE_CHECK_INTERVAL = 10.0

SQL = load("raftflow.stores", "schedules.sql", "schedules")


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as the database holds it (``raftflow schedules``)."""

    workflow: str
    cron: str
    timezone: str
    catch_up: int
    next_at: float  # the time its message is parked until
    firing: bool  # a worker holds it right now
    last_execution: str | None
    workers: int = 0  # live workers that serve its lane (none: it waits, unfired)

    def next_times(self, count: int) -> list[float]:
        schedule = Schedule(self.workflow, self.cron, self.timezone, self.catch_up)
        return [self.next_at, *schedule.next_times(self.next_at, count - 1)] if count else []

    def as_dict(self, count: int = 3) -> dict[str, Any]:
        zone = ZoneInfo(self.timezone)
        return {
            "workflow": self.workflow,
            "cron": self.cron,
            "timezone": self.timezone,
            "catch_up": self.catch_up,
            "next": [
                datetime.fromtimestamp(t, tz=zone).isoformat() for t in self.next_times(count)
            ],
            "firing": self.firing,
            "last_execution": self.last_execution,
            "workers": self.workers,
        }


class ScheduleFlows:
    """The schedules' operations on the database (I/O-free flows), each one request."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def ensure(self, schedules: Sequence[Schedule]) -> Flow[None]:
        """Make sure each schedule's message exists (parked until its next time), and park
        again for the new spec's next time a message whose spec the code changed."""
        if not schedules:
            return
        now = yield from self.clock.now()
        statements = []
        for schedule in schedules:
            at = schedule.next_after(now)
            params = {
                "group_id": schedule.group_id,
                "event": schedule.event(at),
                "now": now,
                "at": at,
                "cron": schedule.cron,
                "timezone": schedule.timezone,
                "catch_up": schedule.catch_up,
                "lane": schedule.lane,
            }
            statements.append(SQL("ensure", params))
            statements.append(SQL("respec", params))
            statements.append(SQL("relane", params))
        response = yield Request(tuple(statements), transaction=True)
        response.raise_for_errors()

    def missing(self, schedules: Sequence[Schedule]) -> Flow[list[Schedule]]:
        """The schedules whose message is gone (a weak read: no Raft entry)."""
        groups = to_json([schedule.group_id for schedule in schedules], what="groups")
        response = yield Request((SQL("present", {"groups": groups}),), level="weak")
        present = {row["group_id"] for row in response.raise_for_errors()[0].dicts()}
        return [schedule for schedule in schedules if schedule.group_id not in present]

    def fire(
        self, lease: Lease, schedule: Schedule, definition: WorkflowDef, lane: str, since: float
    ) -> Flow[FireOutcome]:
        """Start the executions of the due times (in ``lane``: the firing code's version)
        and park the schedule until its next time (fenced by ``lease``)."""
        now = yield from self.clock.now()
        due, skipped = schedule.due(since, now)
        next_at = schedule.next_after(now)  # claimed early (clock skew): due is empty
        timeout = definition.timeout
        deadline = None if timeout is None else surely_after(self.clock, now, timeout)
        starts = [
            {
                "id": schedule.execution_id(at),
                "workflow": definition.name,
                "input": to_json(definition.encode_input(schedule.when(at)), what="input"),
                "event": RUN_TEXT,
                "deadline": deadline,
                "commit_id": uuid.uuid4().hex,
                "lane": lane,
            }
            for at in due
        ]
        next_event = schedule.event(next_at)
        params = {
            "seq": lease.seq,
            "token": lease.token,
            "starts": to_json(starts, what="starts"),
            "next_event": next_event,
            "next_at": next_at,
            "now": now,
        }
        response = yield Request(
            (SQL("fire", params), SQL("fired", {"seq": lease.seq, "next_event": next_event})),
            transaction=True,
        )
        response.raise_for_errors()
        applied = response[1].first() is not None
        return FireOutcome(applied, [schedule.execution_id(at) for at in due], skipped, next_at)

    def list(self, level: ReadLevel = "strong") -> Flow[list[ScheduleInfo]]:
        """Every schedule (``level="weak"``: no Raft entry, for the dashboard)."""
        now = yield from self.clock.now()
        live = LANES("serving_workers", {"since": now - LIVE_WITHIN})
        response = yield Request((SQL("list"), live), level=level)
        served = [lanes_of(row["lanes"]) for row in response.raise_for_errors()[1].dicts()]
        found = []
        for row in response[0].dicts():
            event = parse_schedule_event(row["event"])
            if event is None:
                continue
            found.append(
                ScheduleInfo(
                    workflow=event.workflow,
                    cron=event.cron,
                    timezone=event.timezone,
                    catch_up=event.catch_up,
                    next_at=event.at,
                    firing=row["locked_by"] not in (None, "__parked__"),
                    last_execution=row["last_id"],
                    workers=sum(serves(lanes, row["lane"] or "") for lanes in served),
                )
            )
        return found

    def remove(self, workflow: str) -> Flow[bool]:
        """Delete a schedule's message (workers that still register it make it again)."""
        response = yield Request((SQL("remove", {"group_id": SCHEDULE_PREFIX + workflow}),))
        return bool(response.raise_for_errors()[0].rows_affected)


@dataclass(frozen=True)
class FireOutcome:
    applied: bool  # False: the lease was lost (another worker fires it)
    started: list[str]  # the ids of the due times (created now, or already there)
    skipped: bool  # older missed times were beyond catch_up
    next_at: float


class ScheduleKeeper:
    """The duty that makes sure the schedules a worker registers have their message: all
    of them when the worker starts (retried until it works: the cluster may have no leader
    yet), then, every ``interval``, any that a weak read finds gone."""

    name = "raftflow-schedules"

    def __init__(
        self,
        worker_id: str,
        store: AsyncStore,
        schedules: Sequence[Schedule],
        *,
        interval: float | None = None,
        retry_delay: float = 0.5,
    ) -> None:
        self.worker_id = worker_id
        self.store = store
        self.schedules = list(schedules)
        self.flows = ScheduleFlows(store.clock)
        self.interval = SCHEDULE_CHECK_INTERVAL if interval is None else interval
        self.retry_delay = retry_delay

    async def run(self) -> None:
        pending = self.schedules
        while self.schedules:
            try:
                if pending:
                    await self.store.run(self.flows.ensure(pending))
                await asyncio.sleep(self.interval)
                pending = await self.store.run(self.flows.missing(self.schedules))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("worker %s: schedules not ensured yet: %s", self.worker_id, exc)
                await asyncio.sleep(self.retry_delay)

    async def leave(self) -> None:
        """Nothing to say: the schedules' messages outlive the worker."""
