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
import uuid
from typing import Any

from raftflow.stores.base import ErrorInfo, ExecutionRecord, StartOutcome, Status, StepRecord
from raftflow.transports.catalogue import load
from raftflow.transports.clock import Clock
from raftflow.transports.errors import InvalidArgumentError
from raftflow.transports.flow import Flow, Request, Statement
from raftflow.transports.payload import (
    MAX_PAYLOAD_BYTES,
    check_id,
    check_priority,
    from_json,
    to_json,
)

QUERIES = load("raftflow.stores", "store.sql", "store")

#: Upper bound of ``list(limit=...)``.
MAX_LIST_LIMIT = 10_000


class StoreFlows:
    """The store's logic; :class:`~raftflow.stores.store.SqlStore` and its async twin drive it."""

    def __init__(self, clock: Clock, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self.clock = clock
        self.max_payload_bytes = max_payload_bytes

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
