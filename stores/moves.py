"""Moving partitions between the clusters of a sharded deployment: the rows, batch by batch.

What the engine keeps of one queue group (an execution's is its id) -- the execution, its
records, events, streams, signals, its notes of children elsewhere and its outbox, its
queue's messages and their publish keys -- is read on the cluster it leaves and written
on the one it goes to in one transaction per batch, idempotently: rows with a key are
inserted unless there (``INSERT OR IGNORE``); a signal unless its (execution, key) is
there; a group's messages only if the cluster has none of that group yet (they are
written together, so a group is copied whole or not at all) -- new sequence numbers, in
the same order. Rate-limit reservations go with their key. After the catalog points to
the new cluster (:mod:`raftflow.engine.shards.move`) they are deleted where they were.

A move is done with the deployment's workers stopped: a message that a worker holds now
is refused (:class:`~raftflow.errors.ConfigurationError`), since its worker would go on
writing where the execution no longer is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request, Statement

from raftflow.errors import ConfigurationError

SQL = load("raftflow.stores", "moves.sql", "moves")

#: Tables copied row for row (their rows have a key: a second insert is ignored).
KEYED = ("executions", "steps", "events", "streams", "remote_children", "message_keys")
#: Deleted after the copy, in this order (the messages' keys before the messages).
DELETED = (
    "steps", "events", "streams", "signals", "remote_children", "outbox", "message_keys",
    "messages", "executions",
)  # fmt: skip


@dataclass
class Batch:
    """The rows of some queue groups, as read where they are."""

    ids: list[str]
    keys: list[str]
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(len(rows) for rows in self.rows.values())


def groups() -> Flow[list[str]]:
    """Every queue group of the cluster (executions, and cron schedules' groups)."""
    response = yield Request((SQL("groups", {}),), level="strong")
    return [str(row["id"]) for row in response.raise_for_errors()[0].dicts()]


def rate_keys() -> Flow[list[str]]:
    """The keys the cluster holds rate-limit reservations of."""
    response = yield Request((SQL("rate_keys", {}),), level="strong")
    return [str(row["key"]) for row in response.raise_for_errors()[0].dicts()]


def read(clock: Clock, ids: Sequence[str], keys: Sequence[str]) -> Flow[Batch]:
    """The rows of the groups ``ids`` and of the rate keys ``keys``, refused while a worker
    holds one of the groups' messages."""
    now = yield from clock.now()
    params = {"ids": json.dumps(list(ids)), "keys": json.dumps(list(keys)), "now": now}
    tables = (*KEYED, "outbox", "signals", "messages", "rate_slots")
    response = yield Request(
        (SQL("live_leases", params), *(SQL(f"read.{table}", params) for table in tables)),
        level="strong",
    )
    results = response.raise_for_errors()
    held = results[0].dicts()
    if held:
        shown = ", ".join(sorted({str(row["group_id"]) for row in held})[:5])
        raise ConfigurationError(
            f"workers hold executions of the partitions to move ({shown}): stop the "
            "deployment's workers first (or wait for their leases to lapse)"
        )
    batch = Batch(list(ids), list(keys))
    for table, result in zip(tables, response.results[1:]):
        batch.rows[table] = result.dicts()
    return batch


def write(batch: Batch) -> Flow[None]:
    """Write ``batch`` where it goes, in one transaction (idempotent)."""
    response = yield Request(
        (SQL("copied_groups", {"ids": json.dumps(batch.ids)}),), level="strong"
    )
    copied = {str(row["group_id"]) for row in response.raise_for_errors()[0].dicts()}
    statements: list[Statement] = []
    for table in (*KEYED, "rate_slots"):
        statements += [_insert(table, row, "OR IGNORE") for row in batch.rows[table]]
    statements += [_insert("outbox", row, "OR IGNORE") for row in batch.rows["outbox"]]
    statements += [_new_signal(row) for row in batch.rows["signals"]]
    statements += [
        _insert("messages", _free_if_lapsed(row), "")
        for row in batch.rows["messages"]
        if row["group_id"] not in copied
    ]
    if statements:
        written = yield Request(tuple(statements), transaction=True)
        written.raise_for_errors()


def delete(ids: Sequence[str], keys: Sequence[str]) -> Flow[None]:
    """Delete the groups ``ids`` and the rate keys ``keys`` where they were."""
    params = {"ids": json.dumps(list(ids)), "keys": json.dumps(list(keys))}
    statements = (
        *(SQL(f"delete.{table}", params) for table in DELETED),
        SQL("delete.rate_slots", params),
    )
    response = yield Request(statements, transaction=True)
    response.raise_for_errors()


def _insert(table: str, row: dict[str, Any], conflict: str) -> Statement:
    columns = list(row)  # the table's own column names, as read
    sql = (
        f"INSERT {conflict} INTO {table} ({', '.join(columns)}) "
        f"VALUES ({', '.join(':' + c for c in columns)})"
    )
    return Statement(f"moves.write.{table}", sql, row)


def _new_signal(row: dict[str, Any]) -> Statement:
    columns = list(row)
    sql = (
        f"INSERT INTO signals ({', '.join(columns)}) SELECT {', '.join(':' + c for c in columns)} "
        "WHERE NOT EXISTS (SELECT 1 FROM signals WHERE execution_id = :execution_id AND key = :key)"
    )
    return Statement("moves.write.signals", sql, row)


def _free_if_lapsed(row: dict[str, Any]) -> dict[str, Any]:
    """A message a stopped worker held (its lease lapsed): free, as a claim would see it."""
    if row["locked_by"] is not None and row["locked_by"] != "__parked__":
        return {**row, "locked_by": None, "lock_expiry": None}
    return row
