"""Every store operation as an I/O-free flow, shared by rqlite and SQLite, sync and async.

Reads are cheap first, exact when it matters. A ``weak`` read is answered by the leader
from its own state without a Raft round (0.4 ms instead of 1.5 ms, and no log entry), which
is what status polling needs. But it can be stale: while a deposed leader has not noticed,
and -- seen by the chaos suite -- for seconds after a whole-cluster restart, when the new
leader answers before it has re-applied its log (even "no such table"). So an answer that
would be wrong to act on when stale -- "no such execution", an error -- is read again at
``strong`` (through the Raft log) before it is believed, and the step records, read
rarely, are always read strong. A weak "still running" is merely polled again. The worker
never relies on any of this: it reads what it replays in the same Raft entry as its claim.
"""

from __future__ import annotations

import builtins
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from raftflow.stores.base import ErrorInfo, ExecutionRecord, StartOutcome, Status, StepRecord
from raftflow.transports.catalogue import load
from raftflow.transports.clock import Clock
from raftflow.transports.db import Flow, Request, Response, Statement
from raftflow.transports.errors import InvalidArgumentError
from raftflow.transports.payload import (
    MAX_PAYLOAD_BYTES,
    check_id,
    check_priority,
    from_json,
    to_json,
)
from raftflow.transports.queue import QUERIES as QUEUE_QUERIES

QUERIES = load("raftflow.stores", "store.sql", "store")

#: Upper bound of ``list(limit=...)``.
MAX_LIST_LIMIT = 10_000


@dataclass(frozen=True, slots=True)
class Commit:
    """One fenced commit of an execution's progress (see ``execution_commits`` in SQL).

    ``step_*`` describe a step checkpoint (``step_idx`` None for none); ``status`` with
    ``output`` / ``error`` a status change; ``next_event`` the event to publish after the
    current one, kept leased by ``next_token`` until ``next_expiry`` when asked.
    JSON fields are already serialized text.
    """

    execution_id: str
    lease_seq: int
    lease_token: str
    worker_id: str
    now: float
    commit_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    step_idx: int | None = None
    step_name: str | None = None
    step_succeeded: bool = True
    step_output: str | None = None
    step_error: str | None = None
    step_started_at: float | None = None
    status: Status | None = None
    output: str | None = None
    error: str | None = None
    next_event: str | None = None
    next_priority: int = 0
    next_token: str | None = None
    next_expiry: float | None = None

    def row(self) -> dict[str, Any]:
        """The commit as one row of ``execution_commits`` (one object of the batch)."""
        return {
            "execution_id": self.execution_id,
            "lease_seq": self.lease_seq,
            "lease_token": self.lease_token,
            "commit_id": self.commit_id,
            "now": self.now,
            "worker_id": self.worker_id,
            "step_idx": self.step_idx,
            "step_name": self.step_name,
            "step_status": None
            if self.step_idx is None
            else ("succeeded" if self.step_succeeded else "failed"),
            "step_output": self.step_output,
            "step_error": self.step_error,
            "step_started_at": self.step_started_at,
            "status": None if self.status is None else self.status.value,
            "output": self.output,
            "error": self.error,
            "next_event": self.next_event,
            "next_priority": self.next_priority,
            "next_token": self.next_token,
            "next_expiry": self.next_expiry,
        }


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """Whether a commit applied, and the message its committer now leases (if any)."""

    applied: bool
    error: str | None = None
    next_seq: int | None = None
    next_expiry: float | None = None


class StoreFlows:
    """The store's logic; :class:`~raftflow.stores.sql.SqlStore` and its async twin drive it."""

    def __init__(self, clock: Clock, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self.clock = clock
        self.max_payload_bytes = max_payload_bytes

    def create_schema(self) -> Flow[None]:
        """The queue's schema and the store's, in one transaction: the store's commit
        trigger writes the queue's tables."""
        response = yield Request(QUEUE_QUERIES.schema() + QUERIES.schema(), transaction=True)
        response.raise_for_errors()

    def start(
        self, execution_id: str, workflow: str, input: Any, priority: int, event: Any
    ) -> Flow[StartOutcome]:
        check_id(execution_id, what="execution_id")
        check_id(workflow, what="workflow name")
        check_priority(priority)
        input_text = to_json(input, what="workflow input", limit=self.max_payload_bytes)
        event_text = to_json(event, what="event", limit=self.max_payload_bytes)
        now = yield from self.clock.now()
        commit_id = uuid.uuid4().hex
        params = {
            "id": execution_id,
            "workflow": workflow,
            "input": input_text,
            "priority": priority,
            "event": event_text,
            "now": now,
            "commit_id": commit_id,
        }
        response = yield Request(
            (
                QUERIES("start", params),
                QUERIES("started", {"commit_id": commit_id, "id": execution_id}),
                QUERIES("get", {"id": execution_id}),
            ),
            transaction=True,
        )
        response.raise_for_errors()
        created = response[1].first()
        record = response[2].first()
        if record is None or created is None:
            raise InvalidArgumentError(f"execution {execution_id!r} could not be started")
        return StartOutcome(execution_from_row(record), created=bool(created["created"]))

    def get(self, execution_id: str) -> Flow[ExecutionRecord | None]:
        check_id(execution_id, what="execution_id")
        rows = yield from _read(QUERIES("get", {"id": execution_id}), strong_if_empty=True)
        return execution_from_row(rows[0]) if rows else None

    def list(self, status: Status | None, limit: int) -> Flow[builtins.list[ExecutionRecord]]:
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_LIST_LIMIT
        ):
            raise InvalidArgumentError(f"limit must be an int from 1 to {MAX_LIST_LIMIT}")
        if status is None:
            statement = QUERIES("list_all", {"limit": limit})
        else:
            statement = QUERIES("list_by_status", {"status": Status(status).value, "limit": limit})
        rows = yield from _read(statement)
        return [execution_from_row(row) for row in rows]

    def steps(self, execution_id: str) -> Flow[builtins.list[StepRecord]]:
        check_id(execution_id, what="execution_id")
        response = yield Request((QUERIES("steps", {"id": execution_id}),), level="strong")
        return [step_from_row(row) for row in response.raise_for_errors()[0].dicts()]

    def counts(self) -> Flow[dict[Status, int]]:
        rows = yield from _read(QUERIES("counts"))
        return {Status(row["status"]): int(row["n"]) for row in rows}

    # -- the worker's side, appended to the queue's claim request -------------------------

    @staticmethod
    def claim_context(token: str, now: float) -> Request:
        """Statements that mark what a claim leased as running and read what replay needs.

        Appended to the claim's transaction: one round trip, one Raft entry, and the state
        read is exactly the state the lease was granted on.
        """
        params = {"token": token, "now": now}
        return Request(
            (
                QUERIES("mark_claimed_running", params),
                QUERIES("claimed_executions", params),
                QUERIES("claimed_steps", params),
            ),
            transaction=True,
        )

    @staticmethod
    def context_from(
        response: Response,
    ) -> tuple[dict[str, ExecutionRecord], dict[str, builtins.list[StepRecord]]]:
        executions = {
            row["id"]: execution_from_row(row)
            for row in response.result_of("store.claimed_executions").dicts()
        }
        steps: dict[str, builtins.list[StepRecord]] = {}
        for row in response.result_of("store.claimed_steps").dicts():
            steps.setdefault(row["execution_id"], []).append(step_from_row(row))
        return executions, steps


def _read(
    statement: Statement, *, strong_if_empty: bool = False
) -> Flow[builtins.list[dict[str, Any]]]:
    """Rows of a read: ``weak`` first, again at ``strong`` when the weak answer is an error
    (or empty, if asked) -- the answers a stale leader gives."""
    response = yield Request((statement,), level="weak")
    result = response[0]
    if result.error is None and (result.rows or not strong_if_empty):
        return result.dicts()
    response = yield Request((statement,), level="strong")
    return response.raise_for_errors()[0].dicts()


def execution_from_row(row: dict[str, Any]) -> ExecutionRecord:
    return ExecutionRecord(
        id=row["id"],
        workflow=row["workflow"],
        status=Status(row["status"]),
        input=from_json(row["input"]),
        output=None if row["output"] is None else from_json(row["output"]),
        error=None if row["error"] is None else ErrorInfo.from_json(from_json(row["error"])),
        priority=int(row["priority"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        completed_at=None if row["completed_at"] is None else float(row["completed_at"]),
        steps_done=int(row["steps_done"]),
    )


def step_from_row(row: dict[str, Any]) -> StepRecord:
    return StepRecord(
        execution_id=row["execution_id"],
        idx=int(row["idx"]),
        name=row["name"],
        succeeded=row["status"] == "succeeded",
        output=None if row["output"] is None else from_json(row["output"]),
        error=None if row["error"] is None else ErrorInfo.from_json(from_json(row["error"])),
        started_at=float(row["started_at"]),
        ended_at=float(row["ended_at"]),
        worker_id=row["worker_id"],
    )


def commit_request(commits: Sequence[Commit]) -> Request:
    """Many executions' commits in one request: one round trip, one Raft entry and one
    statement, each commit atomic on its own (a fenced one is skipped alone), plus the read
    of every outcome."""
    batch = json.dumps([commit.row() for commit in commits], separators=(",", ":"))
    params = {"commits": batch}
    return Request(
        (QUERIES("commit", params), QUERIES("commit_outcome", params)), transaction=False
    )


def outcomes_from(response: Response, commits: Sequence[Commit]) -> list[CommitOutcome]:
    """The outcome of each commit of :func:`commit_request`, in order. A commit whose id
    the execution records was applied, by this attempt or an earlier one of the request."""
    error = response[0].error or response[1].error
    rows = {row["position"]: row for row in response[1].dicts()}
    outcomes = []
    for position in range(len(commits)):
        row = rows.get(position)
        if row is None or not row["applied"]:
            outcomes.append(CommitOutcome(False, error=error or "lease lost"))
        else:
            outcomes.append(
                CommitOutcome(True, next_seq=row["next_seq"], next_expiry=row["next_expiry"])
            )
    return outcomes
