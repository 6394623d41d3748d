"""Retention's operations on the database: whether finished executions have expired, and
the deletion of a batch of them with everything of theirs (their records, signals, events,
streams and any event left in their queue group), one transaction each. When and how fast
is the worker's duty (:mod:`raftflow.engine.runtime.retention`)."""

from __future__ import annotations

from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request

SQL = load("raftflow.stores", "retention.sql", "retention")


class RetentionFlows:
    """The retention's operations on the database (I/O-free flows), each one request."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def due(self, keep: float) -> Flow[bool]:
        """Whether any finished execution is older than ``keep`` seconds (a weak read)."""
        now = yield from self.clock.now()
        params = {"cutoff": now - keep, "batch": 1}
        response = yield Request((SQL("expired_any", params),), level="weak")
        row = response.raise_for_errors()[0].first() or {}
        return bool(row.get("due"))

    def delete_batch(self, keep: float, batch: int) -> Flow[int]:
        """Delete up to ``batch`` expired executions and everything of theirs, in one
        transaction; how many executions it deleted."""
        now = yield from self.clock.now()
        params = {"cutoff": now - keep, "batch": batch, "now": now}
        names = (
            "delete_steps",
            "delete_signals",
            "delete_events",
            "delete_streams",
            "delete_remote_children",
            "delete_messages",
            "delete_executions",
        )
        response = yield Request(tuple(SQL(name, params) for name in names), transaction=True)
        return int(response.raise_for_errors()[len(names) - 1].rows_affected or 0)
