"""RqliteStore: executions and step records in the same rqlite cluster as the queue.

It speaks through the same HTTP layer as :class:`~raftflow.transports.rqlite.RqliteTransport`
(:mod:`raftflow.transports.rqlite.client`); built with :meth:`RqliteStore.for_transport` it shares
the transport's connection and clock, which is what lets the engine put a step's
checkpoint, the ack of its event and the publish of the next into one request.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftflow.stores.ops import StoreFlows
from raftflow.stores.sql import AsyncSqlStore, SqlStore
from raftflow.transports.clock import Clock, ClusterClock
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.queue import QUERIES
from raftflow.transports.rqlite import AsyncRqliteTransport, RqliteTransport
from raftflow.transports.rqlite.client import (
    AsyncRqliteConnection,
    HttpLibrary,
    RqliteConnection,
    aconnect,
    connect,
)

__all__ = ["AsyncRqliteStore", "RqliteStore"]


class RqliteStore(SqlStore):
    """The store on rqlite over ``httpx.Client`` (default) or ``requests.Session``."""

    connection: RqliteConnection

    def __init__(
        self,
        connection: RqliteConnection,
        *,
        clock: Clock | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        clock = clock or ClusterClock(QUERIES)
        super().__init__(connection, StoreFlows(clock, max_payload_bytes=max_payload_bytes))
        self.config = connection.config

    @classmethod
    def from_url(
        cls,
        url: str | Sequence[str],
        *,
        http: HttpLibrary = "httpx",
        verify: bool | str = True,
        timeout: float = 10.0,
        retry_timeout: float = 15.0,
        connect_timeout: float = 30.0,
        create_schema: bool = True,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> RqliteStore:
        """Connect as :meth:`RqliteTransport.from_url` does (same URL forms and options)."""
        connection = connect(
            url,
            http=http,
            verify=verify,
            timeout=timeout,
            retry_timeout=retry_timeout,
            connect_timeout=connect_timeout,
        )
        store = cls(connection, max_payload_bytes=max_payload_bytes)
        if create_schema:
            try:
                store.create_schema()
            except BaseException:
                store.close()
                raise
        return store

    @classmethod
    def for_transport(
        cls, transport: RqliteTransport, *, create_schema: bool = True
    ) -> RqliteStore:
        """A store sharing ``transport``'s connection and clock."""
        store = cls(transport.connection, clock=transport.flows.clock)
        if create_schema:
            store.create_schema()
        return store

    def to_async(self) -> AsyncRqliteStore:
        """An async twin on the same cluster, credentials, clock and options."""
        return AsyncRqliteStore(
            self.connection.to_async(),
            clock=self.flows.clock,
            max_payload_bytes=self.flows.max_payload_bytes,
        )


class AsyncRqliteStore(AsyncSqlStore):
    """The async twin of :class:`RqliteStore`, over ``httpx.AsyncClient``."""

    connection: AsyncRqliteConnection

    def __init__(
        self,
        connection: AsyncRqliteConnection,
        *,
        clock: Clock | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        clock = clock or ClusterClock(QUERIES)
        super().__init__(connection, StoreFlows(clock, max_payload_bytes=max_payload_bytes))
        self.config = connection.config

    @classmethod
    async def from_url(
        cls,
        url: str | Sequence[str],
        *,
        verify: bool | str = True,
        timeout: float = 10.0,
        retry_timeout: float = 15.0,
        connect_timeout: float = 30.0,
        create_schema: bool = True,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> AsyncRqliteStore:
        """Connect as :meth:`RqliteStore.from_url` does, awaiting the wait and schema."""
        connection = await aconnect(
            url,
            verify=verify,
            timeout=timeout,
            retry_timeout=retry_timeout,
            connect_timeout=connect_timeout,
        )
        store = cls(connection, max_payload_bytes=max_payload_bytes)
        if create_schema:
            try:
                await store.create_schema()
            except BaseException:
                await store.close()
                raise
        return store

    @classmethod
    def for_transport(cls, transport: AsyncRqliteTransport) -> AsyncRqliteStore:
        """A store sharing ``transport``'s connection and clock (schema not created)."""
        return cls(transport.connection, clock=transport.flows.clock)
