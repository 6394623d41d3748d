"""SqliteTransport: the same queue, schema and SQL on one local SQLite file.

For development, tests and single-machine use: no server to run. Worker processes on the
same machine may share the file; SQLite's write lock serializes their claims as Raft does
for rqlite. Lease times come from this machine's clock, which every process shares.
"""

from __future__ import annotations

from raftflow.transports.clock import Clock, LocalClock
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.queue import QueueFlows
from raftflow.transports.sql import AsyncSqlTransport, SqlTransport
from raftflow.transports.sqlite.connection import (
    AsyncSqliteConnection,
    SqliteConnection,
    path_from_url,
)

__all__ = ["AsyncSqliteTransport", "SqliteConnection", "SqliteTransport"]


class SqliteTransport(SqlTransport):
    """The queue in a SQLite database reached through ``connection``."""

    connection: SqliteConnection

    def __init__(
        self,
        connection: SqliteConnection,
        *,
        clock: Clock | None = None,
        max_event_bytes: int = MAX_PAYLOAD_BYTES,
        dedup_window: float = 900.0,
    ) -> None:
        flows = QueueFlows(
            clock or LocalClock(), max_event_bytes=max_event_bytes, dedup_window=dedup_window
        )
        super().__init__(connection, flows)

    @classmethod
    def from_url(
        cls, url: str = "sqlite:///raftflow.db", *, create_schema: bool = True
    ) -> SqliteTransport:
        """Open ``sqlite:///path.db`` (``sqlite://`` for a private in-memory database)."""
        transport = cls(SqliteConnection(path_from_url(url)))
        if create_schema:
            transport.create_schema()
        return transport

    def to_async(self) -> AsyncSqliteTransport:
        """An async twin sharing this transport's connection and lease bookkeeping."""
        twin = AsyncSqliteTransport.__new__(AsyncSqliteTransport)
        AsyncSqlTransport.__init__(twin, self.connection.to_async(), self.flows)
        return twin


class AsyncSqliteTransport(AsyncSqlTransport):
    """The async twin of :class:`SqliteTransport`; requests run in a worker thread."""

    connection: AsyncSqliteConnection

    def __init__(
        self,
        connection: SqliteConnection,
        *,
        clock: Clock | None = None,
        max_event_bytes: int = MAX_PAYLOAD_BYTES,
        dedup_window: float = 900.0,
    ) -> None:
        flows = QueueFlows(
            clock or LocalClock(), max_event_bytes=max_event_bytes, dedup_window=dedup_window
        )
        super().__init__(AsyncSqliteConnection(connection), flows)

    @classmethod
    async def from_url(
        cls, url: str = "sqlite:///raftflow.db", *, create_schema: bool = True
    ) -> AsyncSqliteTransport:
        """Open ``sqlite:///path.db`` (``sqlite://`` for a private in-memory database)."""
        transport = cls(SqliteConnection(path_from_url(url)))
        if create_schema:
            await transport.create_schema()
        return transport
