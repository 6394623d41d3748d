"""What operators see: lists, one execution in full, the queue and the workers, as flows.

The CLI (``raftflow list/get/queue/workers``) and the dashboard read through
:class:`InspectFlows`, driven by :class:`Inspector` on the engine's sync backend. Every
read is a ``weak`` one (answered by the leader without a Raft entry; see
:mod:`raftflow.stores.flows` for when that can be stale): an execution that a weak read
cannot find is read again at ``strong`` before "not found" is believed. Each view is one
request, so what it shows is one consistent state of the database. The statements are in
``stores/ops.sql`` and ``stores/store.sql`` (``list_*``), each on an index.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raftflow.stores.flows import MAX_LIST_LIMIT
from raftflow.stores.flows import QUERIES as STORE
from raftflow.stores.lanes import LaneDepth, LaneFlows
from raftflow.stores.records import ExecutionRecord, Status, StepRecord
from raftflow.stores.rows import execution_from_row, step_from_row
from raftflow.transports.contract import PARKED
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request, Response, Statement
from raftflow.transports.payload import check_id, from_json

from raftflow.errors import ExecutionNotFoundError, InvalidArgumentError

if TYPE_CHECKING:
    from raftflow.transports.db.database import Database

OPS = load("raftflow.stores", "ops.sql", "ops")

PRIORITIES = (4, 3, 2, 1, 0)
#: Leases listed at most by one ``queue`` read.
MAX_LEASES = 10_000
#: Concurrency limit keys with waiters listed at most by one ``queue`` read.
MAX_LIMIT_KEYS = 1000
#: The length of ":<32 hex>" after the worker id in a lease token.
_TOKEN_SUFFIX = 33


def worker_of(token: str) -> str:
    """The worker id in a lease token (``"<worker id>:<uuid hex>"``)."""
    return token[:-_TOKEN_SUFFIX] if len(token) > _TOKEN_SUFFIX else token


@dataclass(frozen=True, slots=True)
class SignalInfo:
    seq: int
    topic: str
    payload: Any
    sent_at: float
    consumed_idx: int | None
    consumed_at: float | None


@dataclass(frozen=True, slots=True)
class EventInfo:
    key: str
    value: Any
    updated_at: float


@dataclass(frozen=True, slots=True)
class QueuedEvent:
    """One event of an execution's queue group and who leases it (``holder``: a worker
    id; ``parked`` when it waits for its deadline; None when it is free)."""

    seq: int
    holder: str | None
    parked: bool
    expiry: float | None
    published_at: float
    attempts: int


@dataclass(frozen=True, slots=True)
class ExecutionDetail:
    """One execution, everything about it, read in one request."""

    execution: ExecutionRecord
    steps: list[StepRecord]
    signals: list[SignalInfo]
    events: list[EventInfo]
    children: list[ExecutionRecord]
    queued: list[QueuedEvent]
    now: float


@dataclass(frozen=True, slots=True)
class PriorityDepth:
    priority: int
    groups: int  # executions with an event queued at this priority (leased, parked or not)
    ready: int  # claimable now
    oldest_ready_age: float | None  # seconds the oldest claimable one has waited


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    execution_id: str
    seq: int
    worker_id: str
    expiry: float
    attempts: int


@dataclass(frozen=True, slots=True)
class LimitWaiting:
    """The executions waiting for a slot of one concurrency limit key (their groups gated:
    queued, never claimable until admitted)."""

    limit_key: str  # "<workflow>" or "<workflow>:<concurrency_key(input)>"
    workflow: str
    limit: int  # the key's slots
    holding: int  # slots held now (admitted executions, pending or running)
    waiting: int
    next_id: str  # the next one to be admitted (FIFO)
    next_since: float  # when it was started


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    now: float
    priorities: list[PriorityDepth]
    parked: int  # executions' events parked until a deadline (schedules not counted)
    leases: list[LeaseInfo]
    waiting: list[LimitWaiting] = field(default_factory=list)  # per limit key
    schedules: int = 0  # cron schedules parked until their next time

    @property
    def ready(self) -> int:
        return sum(p.ready for p in self.priorities)

    @property
    def waiting_on_limits(self) -> int:
        return sum(w.waiting for w in self.waiting)

    def leases_by_worker(self) -> dict[str, list[LeaseInfo]]:
        by: dict[str, list[LeaseInfo]] = {}
        for lease in self.leases:
            by.setdefault(lease.worker_id, []).append(lease)
        return dict(sorted(by.items()))


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    worker_id: str
    host: str
    pid: int
    version: str
    concurrency: int
    min_priority: int
    state: str
    started_at: float
    seen_at: float
    steps: int
    running: int
    leases: list[LeaseInfo] = field(default_factory=list)  # its in-flight executions


class InspectFlows:
    """The operators' reads, each one request (a weak read)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def list(
        self,
        *,
        status: Status | str | None = None,
        workflow: str | None = None,
        since: float = 0.0,
        limit: int = 50,
    ) -> Flow[builtins.list[ExecutionRecord]]:
        """Executions created at or after ``since`` (epoch seconds), newest first."""
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_LIST_LIMIT
        ):
            raise InvalidArgumentError(f"limit must be an int from 1 to {MAX_LIST_LIMIT}")
        params: dict[str, Any] = {"since": float(since), "limit": limit}
        name = "list_recent"
        if workflow is not None:
            params["workflow"] = check_id(workflow, what="workflow name")
            name = "list_by_workflow"
        if status is not None:
            params["status"] = Status(status).value
            name = "list_by_workflow_status" if workflow is not None else "list_by_status_since"
        response = yield from _read((STORE(name, params),))
        return [execution_from_row(row) for row in response[0].dicts()]

    def counts(self, since: float = 0.0) -> Flow[dict[Status, int]]:
        """How many executions of each status were created at or after ``since``."""
        statements = tuple(
            STORE("count_by_status_since", {"status": status.value, "since": float(since)})
            for status in Status
        )
        response = yield from _read(statements)
        return {
            status: int((result.first() or {}).get("n") or 0)
            for status, result in zip(Status, response.results)
        }

    def detail(self, execution_id: str) -> Flow[ExecutionDetail]:
        """One execution with its calls, signals, events, children and queued events;
        :class:`ExecutionNotFoundError` if there is none (confirmed at ``strong``)."""
        check_id(execution_id, what="execution_id")
        now = yield from self.clock.now()
        params = {"id": execution_id}
        statements = (
            STORE("get", params),
            STORE("steps", params),
            OPS("signals_of", params),
            OPS("events_of", params),
            STORE("children", params),
            OPS("messages_of", params),
        )
        results = (yield from _read(statements, strong_if_empty=True)).results
        record = results[0].first()
        if record is None:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        return ExecutionDetail(
            execution=execution_from_row(record),
            steps=[step_from_row(row) for row in results[1].dicts()],
            signals=[
                SignalInfo(
                    seq=int(row["seq"]),
                    topic=row["topic"],
                    payload=from_json(row["payload"]),
                    sent_at=float(row["sent_at"]),
                    consumed_idx=row["consumed_idx"],
                    consumed_at=row["consumed_at"],
                )
                for row in results[2].dicts()
            ],
            events=[
                EventInfo(row["key"], from_json(row["value"]), float(row["updated_at"]))
                for row in results[3].dicts()
            ],
            children=[execution_from_row(row) for row in results[4].dicts()],
            queued=[_queued(row) for row in results[5].dicts()],
            now=now,
        )

    def queue(self) -> Flow[QueueSnapshot]:
        """Depth per priority, parked events, the executions waiting on concurrency limits
        and every lease, in one request."""
        now = yield from self.clock.now()
        statements = (
            *(OPS("queue_depth", {"priority": p, "now": now}) for p in PRIORITIES),
            OPS("parked", {"now": now}),
            OPS("limit_waiting", {"limit": MAX_LIMIT_KEYS}),
            OPS("leases", {"limit": MAX_LEASES}),
        )
        results = (yield from _read(statements)).results
        depths = []
        for result in results[: len(PRIORITIES)]:
            row = result.first() or {}
            oldest = row.get("oldest_ready")
            depths.append(
                PriorityDepth(
                    priority=int(row.get("priority") or 0),
                    groups=int(row.get("groups") or 0),
                    ready=int(row.get("ready") or 0),
                    oldest_ready_age=None if oldest is None else max(0.0, now - float(oldest)),
                )
            )
        parked_row = results[len(PRIORITIES)].first() or {}
        schedules = int(parked_row.get("schedules") or 0)
        waiting = [
            LimitWaiting(
                limit_key=row["limit_key"],
                workflow=row["workflow"],
                limit=int(row["limit_max"] or 0),
                holding=int(row["holding"] or 0),
                waiting=int(row["waiting"]),
                next_id=row["next_id"],
                next_since=float(row["next_since"]),
            )
            for row in results[len(PRIORITIES) + 1].dicts()
        ]
        leases = [
            LeaseInfo(
                execution_id=row["group_id"],
                seq=int(row["seq"]),
                worker_id=worker_of(row["locked_by"]),
                expiry=float(row["lock_expiry"] or 0.0),
                attempts=int(row["attempts"]),
            )
            for row in results[-1].dicts()
        ]
        return QueueSnapshot(
            now=now,
            priorities=depths,
            parked=int(parked_row.get("parked") or 0) - schedules,
            leases=leases,
            waiting=waiting,
            schedules=schedules,
        )

    def workers(self, within: float = 60.0) -> Flow[builtins.list[WorkerInfo]]:
        """Workers seen in the last ``within`` seconds, each with the leases it holds."""
        now = yield from self.clock.now()
        statements = (
            OPS("workers_seen", {"since": now - within}),
            OPS("leases", {"limit": MAX_LEASES}),
        )
        results = (yield from _read(statements)).results
        leases: dict[str, list[LeaseInfo]] = {}
        for row in results[1].dicts():
            lease = LeaseInfo(
                execution_id=row["group_id"],
                seq=int(row["seq"]),
                worker_id=worker_of(row["locked_by"]),
                expiry=float(row["lock_expiry"] or 0.0),
                attempts=int(row["attempts"]),
            )
            leases.setdefault(lease.worker_id, []).append(lease)
        return [
            WorkerInfo(
                worker_id=row["worker_id"],
                host=row["host"],
                pid=int(row["pid"]),
                version=row["version"],
                concurrency=int(row["concurrency"]),
                min_priority=int(row["min_priority"]),
                state=row["state"],
                started_at=float(row["started_at"]),
                seen_at=float(row["seen_at"]),
                steps=int(row["steps"]),
                running=int(row["running"]),
                leases=leases.get(row["worker_id"], []),
            )
            for row in sorted(results[0].dicts(), key=lambda row: str(row["worker_id"]))
        ]


def _queued(row: dict[str, Any]) -> QueuedEvent:
    locked_by = row["locked_by"]
    parked = locked_by == PARKED
    return QueuedEvent(
        seq=int(row["seq"]),
        holder=None if locked_by is None or parked else worker_of(locked_by),
        parked=parked,
        expiry=row["lock_expiry"] if locked_by is not None else None,
        published_at=float(row["published_at"]),
        attempts=int(row["attempts"]),
    )


def _read(statements: Sequence[Statement], *, strong_if_empty: bool = False) -> Flow[Response]:
    """One read request, ``weak``; again at ``strong`` if a statement failed (a stale
    leader's "no such table") or, when asked, if the first one found nothing."""
    response = yield Request(tuple(statements), level="weak")
    stale = any(result.error is not None for result in response.results)
    if stale or (strong_if_empty and not response[0].rows):
        response = yield Request(tuple(statements), level="strong")
    return response.raise_for_errors()


class Inspector:
    """:class:`InspectFlows` and the store's actions on one sync database: what the CLI
    and the dashboard call."""

    def __init__(self, database: Database, clock: Clock | None = None) -> None:
        self.database = database
        self.flows = InspectFlows(clock or database.clock)

    def list(self, **filters: Any) -> builtins.list[ExecutionRecord]:
        return self.database.run(self.flows.list(**filters))

    def counts(self, since: float = 0.0) -> dict[Status, int]:
        return self.database.run(self.flows.counts(since))

    def detail(self, execution_id: str) -> ExecutionDetail:
        return self.database.run(self.flows.detail(execution_id))

    def queue(self) -> QueueSnapshot:
        return self.database.run(self.flows.queue())

    def workers(self, within: float = 60.0) -> builtins.list[WorkerInfo]:
        return self.database.run(self.flows.workers(within))

    def lanes(self) -> builtins.list[LaneDepth]:
        return self.database.run(LaneFlows(self.flows.clock).depths())

    def now(self) -> float:
        return self.database.run(self.flows.clock.now())
