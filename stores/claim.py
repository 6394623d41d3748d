"""What a claim reads for the runs it leases, in the claim's own transaction.

The transport's claim leases events; on the store that shares its database the same
request also marks the executions running and reads what their runs need -- the
execution, the first page of its records (none for a run the worker kept and finds
unchanged), its unread signals and its children -- so the state a run replays is the state
its lease was granted on (one request, one Raft entry). Longer histories are read in pages.
"""

from __future__ import annotations

import json

from raftflow.stores.flows import QUERIES as STORE
from raftflow.stores.records import ChildState, Claimed, ErrorInfo, Signal, Status, StepRecord
from raftflow.stores.rows import execution_from_row, step_from_row
from raftflow.transports.contract import Lease
from raftflow.transports.db.flow import Flow, Request, Response, Statement
from raftflow.transports.lanes import Lanes
from raftflow.transports.payload import from_json
from raftflow.transports.queue import QueueFlows

#: Calls of an execution's history read per page (the claim reads the first page).
HISTORY_PAGE = 1000


def claim_runs(
    queue: QueueFlows,
    worker_id: str,
    visibility: float,
    limit: int,
    min_priority: int,
    cached: dict[str, tuple[str | None, int]] | None = None,
    lanes: Lanes = None,
) -> Flow[list[Claimed]]:
    """The queue's claim of up to ``limit`` events with these reads in its transaction, on
    the database the queue and the store share (one request, one Raft entry); the leases
    are settled by the store's commits (untracked by the queue). Leased but unreadable:
    the leases are given back at once rather than left to lapse."""

    def context(token: str, now: float) -> tuple[Statement, ...]:
        return claim_context(token, now, cached or {})

    claim = yield from queue.claim(
        worker_id, visibility, limit, min_priority, lanes=lanes, context=context, track=False
    )
    try:
        return claimed(claim.leases, claim.response)
    except Exception:
        yield Request(
            tuple(queue.nack_statement(lease, 0.0, 0.0) for lease in claim.leases),
            transaction=False,
        )
        raise


def history(execution_id: str, have: list[StepRecord], last: int) -> Flow[list[StepRecord]]:
    """The calls ``0..last`` of an execution, reading in pages what ``have`` lacks."""
    steps = list(have)
    while len(steps) <= last:
        params = {"id": execution_id, "first": len(steps), "page": HISTORY_PAGE}
        response = yield Request((STORE("steps_page", params),), level="strong")
        page = [step_from_row(row) for row in response.raise_for_errors()[0].dicts()]
        if not page:
            break
        steps.extend(page)
    return steps


def claimed(leases: list[Lease], response: Response) -> list[Claimed]:
    executions = {
        row["id"]: execution_from_row(row)
        for row in response.result_of("store.claimed_executions").dicts()
    }
    steps: dict[str, list[StepRecord]] = {}
    for row in response.result_of("store.claimed_steps").dicts():
        steps.setdefault(row["execution_id"], []).append(step_from_row(row))
    signals: dict[str, list[Signal]] = {}
    for row in response.result_of("store.claimed_signals").dicts():
        signal = Signal(row["seq"], row["topic"], from_json(row["payload"]))
        signals.setdefault(row["execution_id"], []).append(signal)
    children: dict[str, dict[str, ChildState]] = {}
    for row in response.result_of("store.claimed_children").dicts():
        children.setdefault(row["parent_id"], {})[row["id"]] = ChildState(
            id=row["id"],
            workflow=row["workflow"],
            status=Status(row["status"]),
            output=None if row["output"] is None else from_json(row["output"]),
            error=None if row["error"] is None else ErrorInfo.from_json(from_json(row["error"])),
        )
    return [
        Claimed(
            lease,
            executions.get(lease.group_id),
            steps.get(lease.group_id, []),
            signals.get(lease.group_id, []),
            children.get(lease.group_id, {}),
        )
        for lease in leases
    ]


def claim_context(
    token: str, now: float, cached: dict[str, tuple[str | None, int]] | None = None
) -> tuple[Statement, ...]:
    params = {
        "token": token,
        "now": now,
        "page": HISTORY_PAGE,
        "cached": json.dumps(cached or {}, separators=(",", ":")),
    }
    return (
        STORE("mark_claimed_running", params),
        STORE("claimed_executions", params),
        STORE("claimed_steps", params),
        STORE("claimed_signals", params),
        STORE("claimed_children", params),
    )
