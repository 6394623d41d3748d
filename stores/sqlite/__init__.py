"""SqliteStore: the same store, schema and SQL on one local SQLite file.

With :meth:`SqliteStore.for_transport` it shares the transport's connection, so the
engine's commits are atomic exactly as on rqlite.
"""

from __future__ import annotations

from raftflow.stores.ops import StoreFlows
from raftflow.stores.sql import AsyncSqlStore, SqlStore
from raftflow.transports.clock import Clock, LocalClock
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.sqlite import SqliteTransport
from raftflow.transports.sqlite.connection import (
    AsyncSqliteConnection,
    SqliteConnection,
    path_from_url,
)

__all__ = ["AsyncSqliteStore", "SqliteStore"]


class SqliteStore(SqlStore):
    """The store in a SQLite database reached through ``connection``."""

    connection: SqliteConnection

    def __init__(
        self,
        connection: SqliteConnection,
        *,
        clock: Clock | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        flows = StoreFlows(clock or LocalClock(), max_payload_bytes=max_payload_bytes)
        super().__init__(connection, flows)

    @classmethod
    def from_url(
        cls, url: str = "sqlite:///raftflow.db", *, create_schema: bool = True
    ) -> SqliteStore:
        """Open ``sqlite:///path.db`` (``sqlite://`` for a private in-memory database)."""
        store = cls(SqliteConnection(path_from_url(url)))
        if create_schema:
            store.create_schema()
        return store

    @classmethod
    def for_transport(
        cls, transport: SqliteTransport, *, create_schema: bool = True
    ) -> SqliteStore:
        """A store sharing ``transport``'s connection and clock."""
        store = cls(transport.connection, clock=transport.flows.clock)
        if create_schema:
            store.create_schema()
        return store

    def to_async(self) -> AsyncSqliteStore:
        """An async twin sharing this store's connection."""
        return AsyncSqliteStore(
            self.connection, clock=self.flows.clock, max_payload_bytes=self.flows.max_payload_bytes
        )


class AsyncSqliteStore(AsyncSqlStore):
    """The async twin of :class:`SqliteStore`; requests run in a worker thread."""

    connection: AsyncSqliteConnection

    def __init__(
        self,
        connection: SqliteConnection,
        *,
        clock: Clock | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        flows = StoreFlows(clock or LocalClock(), max_payload_bytes=max_payload_bytes)
        super().__init__(AsyncSqliteConnection(connection), flows)
