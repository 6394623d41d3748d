"""Rows as the store's SQL returns them, turned into records (and the start's parameters)."""

from __future__ import annotations

import builtins
from typing import Any

from raftflow.stores.records import AttemptRecord, ErrorInfo, ExecutionRecord, Status, StepRecord
from raftflow.transports.db.flow import Flow, Request, Statement
from raftflow.transports.payload import from_json, to_json


def read(
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


#: What the fast path's execution (as a read of ``execution_columns`` returns it) takes
#: from the start's parameters as they are.
STARTED_COLUMNS = (
    "id", "workflow", "input", "priority", "parent_id", "deadline", "trace_context",
)  # fmt: skip


def start_params(
    execution_id: str,
    workflow: str,
    input_text: str,
    priority: int,
    event_text: str,
    now: float,
    commit_id: str,
    *,
    parent_id: str | None = None,
    deadline: float | None = None,
    lease_token: str | None = None,
    lease_expiry: float | None = None,
    limit_key: str | None = None,
    limit_max: int | None = None,
    debounce_until: float | None = None,
    lane: str | None = None,
) -> dict[str, Any]:
    """The parameters of the ``start`` statement (JSON already serialized): the one place
    that knows them, for the store and for tools that write starts in bulk (bench/)."""
    return {
        "id": execution_id,
        "workflow": workflow,
        "input": input_text,
        "priority": priority,
        "event": event_text,
        "now": now,
        "commit_id": commit_id,
        "parent_id": parent_id,
        "deadline": deadline,
        "lease_token": lease_token,
        "lease_expiry": lease_expiry,
        "limit_key": limit_key,
        "limit_max": limit_max,
        "debounce_until": debounce_until,
        "lane": lane,
    }


def cancelled_error(reason: str) -> str:
    """The stored error of a cancelled execution: why it was cancelled."""
    return to_json(ErrorInfo("Cancelled", reason).to_json(), what="cancel reason")


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
        parent_id=row.get("parent_id"),
        cancel_reason=row.get("cancel_reason"),
        deadline=row.get("deadline"),
        trace_context=row.get("trace_context"),
        run=int(row.get("run") or 1),
        commit_id=row.get("commit_id"),
        last_idx=row.get("last_idx"),
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
        kind=row.get("kind") or "step",
        status=row["status"],
        attempts=int(row.get("attempts") or 1),
        wake_at=row.get("wake_at"),
        history=tuple(
            AttemptRecord(
                attempt=int(entry["attempt"]),
                type=str(entry["type"]),
                message=str(entry["message"]),
                started_at=float(entry["started_at"]),
                ended_at=float(entry["ended_at"]),
                resumed_at=entry.get("resumed_at"),
            )
            for entry in from_json(row.get("history") or "[]")
        ),
    )
