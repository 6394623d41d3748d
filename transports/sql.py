"""The queue over any connection: the sync and async twins of every transport.

Both classes only drive :class:`~raftflow.transports.queue.QueueFlows` over a connection; they
differ by ``await`` alone. :class:`~raftflow.transports.rqlite.RqliteTransport` and
:class:`~raftflow.transports.sqlite.SqliteTransport` add how to connect.
"""

from __future__ import annotations

from typing import Any

from raftflow.transports.base import Lease, QueueStats
from raftflow.transports.db import AsyncConnection, Connection, adrive, drive
from raftflow.transports.queue import QueueFlows


class SqlTransport:
    """A lease-based queue in a SQL database reached through a sync connection."""

    def __init__(self, connection: Connection, flows: QueueFlows) -> None:
        self.connection = connection
        self.flows = flows

    def create_schema(self) -> None:
        """Create the queue's tables, indexes and triggers if they do not exist."""
        drive(self.connection, self.flows.create_schema())

    def publish(
        self, group_id: str, event: Any, priority: int = 0, *, key: str | None = None
    ) -> None:
        """Append ``event`` (JSON-serializable) to ``group_id``; 1 round trip.

        ``priority`` (0-4) is the group's, set by its first publish. ``key`` makes the
        publish idempotent: a second publish with the same key within the dedup window
        adds nothing (one is generated when omitted, which makes retries safe).
        """
        drive(self.connection, self.flows.publish(group_id, event, priority, key))

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Lease | None:
        """Lease the oldest message of the next group in round-robin order; 1 round trip.

        Returns None when nothing is claimable. The lease lasts ``visibility`` seconds.
        """
        leases = drive(self.connection, self.flows.claim(worker_id, visibility, 1, min_priority))
        return leases[0] if leases else None

    def claim_many(
        self, worker_id: str, visibility: float, limit: int, min_priority: int = 0
    ) -> list[Lease]:
        """Lease the heads of up to ``limit`` groups in one statement; 1 round trip."""
        return drive(self.connection, self.flows.claim(worker_id, visibility, limit, min_priority))

    def claimable(self, min_priority: int = 0) -> bool:
        """Whether a claim would find a message now (a read: no Raft entry)."""
        return drive(self.connection, self.flows.claimable(min_priority))

    def ack(self, lease: Lease) -> None:
        """Delete the leased message; its group row goes with the last message."""
        drive(self.connection, self.flows.ack(lease))

    def nack(self, lease: Lease, delay: float = 0) -> None:
        """Give the message back: claimable again now, or after ``delay`` seconds (parked,
        keeping its group blocked until then)."""
        drive(self.connection, self.flows.nack(lease, delay))

    def extend(self, lease: Lease, visibility: float) -> Lease:
        """Push the lease deadline to ``visibility`` seconds from now (a heartbeat)."""
        return drive(self.connection, self.flows.extend(lease, visibility))

    def stats(self) -> QueueStats:
        """Counts of messages, leased, parked and groups (a strong read)."""
        return drive(self.connection, self.flows.stats())

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> SqlTransport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.connection!r}>"


class AsyncSqlTransport:
    """The async twin of :class:`SqlTransport`: the same operations, awaited."""

    def __init__(self, connection: AsyncConnection, flows: QueueFlows) -> None:
        self.connection = connection
        self.flows = flows

    async def create_schema(self) -> None:
        """Create the queue's tables, indexes and triggers if they do not exist."""
        await adrive(self.connection, self.flows.create_schema())

    async def publish(
        self, group_id: str, event: Any, priority: int = 0, *, key: str | None = None
    ) -> None:
        """Append ``event`` (JSON-serializable) to ``group_id``; 1 round trip."""
        await adrive(self.connection, self.flows.publish(group_id, event, priority, key))

    async def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Lease | None:
        """Lease the oldest message of the next group in round-robin order; 1 round trip."""
        leases = await adrive(
            self.connection, self.flows.claim(worker_id, visibility, 1, min_priority)
        )
        return leases[0] if leases else None

    async def claim_many(
        self, worker_id: str, visibility: float, limit: int, min_priority: int = 0
    ) -> list[Lease]:
        """Lease the heads of up to ``limit`` groups in one statement; 1 round trip."""
        return await adrive(
            self.connection, self.flows.claim(worker_id, visibility, limit, min_priority)
        )

    async def claimable(self, min_priority: int = 0) -> bool:
        """Whether a claim would find a message now (a read: no Raft entry)."""
        return await adrive(self.connection, self.flows.claimable(min_priority))

    async def ack(self, lease: Lease) -> None:
        """Delete the leased message; its group row goes with the last message."""
        await adrive(self.connection, self.flows.ack(lease))

    async def nack(self, lease: Lease, delay: float = 0) -> None:
        """Give the message back, now or parked for ``delay`` seconds."""
        await adrive(self.connection, self.flows.nack(lease, delay))

    async def extend(self, lease: Lease, visibility: float) -> Lease:
        """Push the lease deadline to ``visibility`` seconds from now (a heartbeat)."""
        return await adrive(self.connection, self.flows.extend(lease, visibility))

    async def stats(self) -> QueueStats:
        """Counts of messages, leased, parked and groups (a strong read)."""
        return await adrive(self.connection, self.flows.stats())

    async def close(self) -> None:
        await self.connection.close()

    async def __aenter__(self) -> AsyncSqlTransport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.connection!r}>"
