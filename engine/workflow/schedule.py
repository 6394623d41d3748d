"""A cron schedule's spec: when a workflow is started, and the id of each time's execution.

The spec is parsed and checked when ``@engine.scheduled`` decorates (a bad expression, zone
or bound fails there); the cron arithmetic is ``croniter``'s. How workers fire schedules is
:mod:`raftflow.engine.runtime.schedules`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from raftflow.engine.workflow.queues import UNROUTED
from raftflow.transports.payload import from_json, to_json

from raftflow.errors import ConfigurationError, InvalidArgumentError

if TYPE_CHECKING:
    from croniter import croniter
    from raftflow.engine.workflow.registry import WorkflowDef

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
    lane: str = UNROUTED  # its workflow's: only workers that serve it fire it

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
