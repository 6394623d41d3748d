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

import logging
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from raftflow.engine.workflow.events import RUN_TEXT
from raftflow.transports.contract import Lease
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, ReadLevel, Request
from raftflow.transports.payload import from_json, to_json

from raftflow.errors import ConfigurationError, InvalidArgumentError

if TYPE_CHECKING:
    from croniter import croniter
    from raftflow.engine.workflow.registry import WorkflowDef

log = logging.getLogger("raftflow.worker")

SQL = load("raftflow.stores", "schedules.sql", "schedules")

#: Queue groups of the engine's own events start with this; execution ids may not.
RESERVED_PREFIX = "raftflow:"
#: The queue group of a workflow's schedule is this prefix and the workflow's name.
SCHEDULE_PREFIX = "raftflow:schedule:"
#: The default bound of missed times started on recovery (besides the latest due one).
DEFAULT_CATCH_UP = 10
#: At most this many missed times can be asked for (one fire starts them in one request).
MAX_CATCH_UP = 1000


class ScheduleEvent(pydantic.BaseModel):
    """The event of a schedule's message: which time it waits for, and its spec (shown by
    ``raftflow schedules``; the deployed code's spec is what fires)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    kind: Literal["schedule"] = "schedule"
    workflow: str
    cron: str
    timezone: str
    catch_up: int
    at: float  # the fire time it is parked until (epoch seconds)


@dataclass(frozen=True)
class Schedule:
    """One workflow's cron schedule (``@engine.scheduled``)."""

    workflow: str
    cron: str
    timezone: str = "UTC"
    catch_up: int = DEFAULT_CATCH_UP

    @classmethod
    def of(cls, workflow: str, cron: object, timezone: object, catch_up: object) -> Schedule:
        """Validated: a clear error at decoration time for a bad cron, zone or bound."""
        if not isinstance(cron, str):
            raise InvalidArgumentError(f"cron must be a str, not {type(cron).__name__}")
        cron = " ".join(cron.split())
        fields = len(cron.split(" ")) if cron else 0
        from croniter import croniter  # imported by the first schedule, not by raftflow

        if fields not in (5, 6) or not croniter.is_valid(cron, second_at_beginning=True):
            raise InvalidArgumentError(
                f"invalid cron expression {cron!r}: five fields (minute hour day month "
                "weekday), or six with seconds first"
            )
        if not isinstance(timezone, str) or not timezone:
            raise InvalidArgumentError("timezone must be an IANA zone name such as 'UTC'")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidArgumentError(f"unknown time zone {timezone!r}") from None
        if isinstance(catch_up, bool) or not isinstance(catch_up, int):
            raise InvalidArgumentError(f"catch_up must be an int, not {catch_up!r}")
        if not 0 <= catch_up <= MAX_CATCH_UP:
            raise InvalidArgumentError(f"catch_up must be between 0 and {MAX_CATCH_UP}")
        return cls(workflow, cron, timezone, catch_up)

    @property
    def group_id(self) -> str:
        return SCHEDULE_PREFIX + self.workflow

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def _iter(self, at: float) -> croniter:
        from croniter import croniter

        start = datetime.fromtimestamp(at, tz=self.zone)
        return croniter(self.cron, start, second_at_beginning=True)

    def when(self, at: float) -> datetime:
        """A fire time as an aware datetime in the schedule's zone (the workflow's input)."""
        return datetime.fromtimestamp(at, tz=self.zone)

    def execution_id(self, at: float) -> str:
        """``"<workflow>@<ISO time>"``: the one execution of that fire time."""
        return f"{self.workflow}@{self.when(at).isoformat()}"

    def next_after(self, now: float) -> float:
        """The first fire time strictly after ``now``."""
        return float(self._iter(math.floor(now)).get_next(float))

    def next_times(self, after: float, count: int) -> list[float]:
        """The ``count`` fire times strictly after ``after``."""
        it = self._iter(math.floor(after))
        return [float(it.get_next(float)) for _ in range(count)]

    def due(self, since: float, now: float) -> tuple[list[float], bool]:
        """The fire times in ``[since, now]`` to start, oldest first: the latest and up to
        ``catch_up`` earlier ones; and whether older ones were skipped."""
        it = self._iter(math.floor(now) + 1)  # get_prev is strictly before its start
        times: list[float] = []
        while len(times) < self.catch_up + 1:
            at = float(it.get_prev(float))
            if at < since - 1e-6:
                return times[::-1], False
            times.append(at)
        skipped = float(it.get_prev(float)) >= since - 1e-6
        return times[::-1], skipped

    def event(self, at: float) -> str:
        value = ScheduleEvent(
            workflow=self.workflow,
            cron=self.cron,
            timezone=self.timezone,
            catch_up=self.catch_up,
            at=at,
        )
        return to_json(value.model_dump(mode="json"), what="event")


def parse_schedule_event(value: Any) -> ScheduleEvent | None:
    """The event of a schedule's message (a lease's parsed event, or JSON text), or None."""
    try:
        return ScheduleEvent.model_validate(from_json(value) if isinstance(value, str) else value)
    except (pydantic.ValidationError, ValueError):
        return None


def is_engine_group(group_id: str) -> bool:
    """A queue group of the engine's own events (a schedule), not an execution's."""
    return group_id.startswith(RESERVED_PREFIX)


def check_execution_id(execution_id: str) -> None:
    if is_engine_group(execution_id):
        raise InvalidArgumentError(
            f"execution ids starting with {RESERVED_PREFIX!r} are reserved for the engine"
        )


def check_input(schedule: Schedule, definition: WorkflowDef) -> None:
    """The workflow must accept the scheduled time (a datetime) as its input."""
    try:
        definition.encode_input(datetime.now(tz=dt_timezone.utc))
    except Exception as exc:
        raise ConfigurationError(
            f"scheduled workflow {schedule.workflow!r} must take the scheduled time (a "
            f"datetime) as its input: {exc}"
        ) from None


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
            }
            statements.append(SQL("ensure", params))
            statements.append(SQL("respec", params))
        response = yield Request(tuple(statements), transaction=True)
        response.raise_for_errors()

    def missing(self, schedules: Sequence[Schedule]) -> Flow[list[Schedule]]:
        """The schedules whose message is gone (a weak read: no Raft entry)."""
        groups = to_json([schedule.group_id for schedule in schedules], what="groups")
        response = yield Request((SQL("present", {"groups": groups}),), level="weak")
        present = {row["group_id"] for row in response.raise_for_errors()[0].dicts()}
        return [schedule for schedule in schedules if schedule.group_id not in present]

    def fire(
        self, lease: Lease, schedule: Schedule, definition: WorkflowDef, since: float
    ) -> Flow[FireOutcome]:
        """Start the executions of the due times and park the schedule until its next time
        (fenced by ``lease``)."""
        now = yield from self.clock.now()
        due, skipped = schedule.due(since, now)
        next_at = schedule.next_after(now)  # claimed early (clock skew): due is empty
        starts = [
            {
                "id": schedule.execution_id(at),
                "workflow": definition.name,
                "input": to_json(definition.encode_input(schedule.when(at)), what="input"),
                "event": RUN_TEXT,
                "deadline": None if definition.timeout is None else now + definition.timeout,
                "commit_id": uuid.uuid4().hex,
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
        response = yield Request((SQL("list"),), level=level)
        found = []
        for row in response.raise_for_errors()[0].dicts():
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
