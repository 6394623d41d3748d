"""What one cluster of a sharded deployment tells another, through a durable outbox.

An execution and everything of it live on one cluster; what crosses clusters is news
between executions: a child that finished (for its parent elsewhere), a cancel (for a
child elsewhere of a cancelled parent). The cluster where it happens writes an ``outbox``
row in the transaction that makes it happen (a trigger), so the news is never lost; a
worker of that cluster relays it (:mod:`raftflow.engine.runtime.relay`): it applies the row
on the other cluster -- idempotently, so a relay that dies after applying and before
deleting the row does no harm when the row is relayed again -- and deletes it here.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from raftflow.stores.rows import cancelled_error, read
from raftflow.transports.contract import Lease
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request

SQL = load("raftflow.stores", "outbox.sql", "outbox")

#: Rows relayed per read of the outbox.
RELAY_BATCH = 100


@dataclass(frozen=True, slots=True)
class Notice:
    """An outbox row: news for ``target`` from ``source``."""

    seq: int
    target: str
    kind: str  # "child_finished" or "cancel"
    source: str
    payload: dict[str, Any] | None


def note_child(
    clock: Clock, parent_id: str, child_id: str, workflow: str, lease: Lease
) -> Flow[bool]:
    """On the parent's cluster: it has a child elsewhere (before the child's start), if the
    parent's ``lease`` still holds; whether the note is there."""
    now = yield from clock.now()
    params = {
        "parent_id": parent_id,
        "id": child_id,
        "workflow": workflow,
        "now": now,
        "lease_seq": lease.seq,
        "lease_token": lease.token,
    }
    response = yield Request((SQL("note_child", params), SQL("noted", params)))
    return bool(response.raise_for_errors()[1].dicts()[0]["noted"])


def pending(limit: int = RELAY_BATCH) -> Flow[list[Notice]]:
    """The oldest rows of the outbox (a ``weak`` read: a row missed now is read next time)."""
    rows = yield from read(SQL("pending", {"limit": limit}))
    return [
        Notice(
            int(row["seq"]),
            str(row["target"]),
            str(row["kind"]),
            str(row["source"]),
            None if row["payload"] is None else json.loads(row["payload"]),
        )
        for row in rows
    ]


def backlog() -> Flow[tuple[int, float | None]]:
    """The rows waiting in the outbox, and the creation time of the oldest (a weak read)."""
    (row,) = yield from read(SQL("backlog", {}))
    return int(row["rows"]), None if row["oldest"] is None else float(row["oldest"])


def child_finished(clock: Clock, notice: Notice) -> Flow[None]:
    """On the parent's cluster: record the child's outcome (once) and wake the parent."""
    now = yield from clock.now()
    params = {
        "parent_id": notice.target,
        "id": notice.source,
        "payload": json.dumps(notice.payload),
        "now": now,
    }
    response = yield Request(
        (SQL("child_finished", params), SQL("wake", {"id": notice.target, "now": now})),
        transaction=True,
    )
    response.raise_for_errors()


def delivered(notice: Notice) -> Flow[None]:
    """On the cluster of the outbox: the row was applied where it goes."""
    response = yield Request((SQL("delivered", {"seq": notice.seq}),))
    response.raise_for_errors()


def child_workflow(parent_id: str, child_id: str) -> Flow[str | None]:
    """On the parent's cluster: the workflow of a child it noted elsewhere (None: none)."""
    rows = yield from read(SQL("child_workflow", {"parent_id": parent_id, "id": child_id}))
    return None if not rows else str(rows[0]["workflow"])


def cancelled_before_start(clock: Clock, notice: Notice, workflow: str, reason: str) -> Flow[None]:
    """On a child's cluster: write the child of ``notice`` (a cancel) cancelled, before its
    start arrives (nothing if an execution of its id is there)."""
    now = yield from clock.now()
    params = {
        "id": notice.target,
        "workflow": workflow,
        "error": cancelled_error(reason),
        "now": now,
        "commit_id": uuid.uuid4().hex,
        "parent_id": notice.source,
        "reason": reason,
    }
    response = yield Request((SQL("cancelled_before_start", params),))
    response.raise_for_errors()
