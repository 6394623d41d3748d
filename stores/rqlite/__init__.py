"""RqliteStore: executions and step records in the same rqlite cluster as the queue.

The classes are :class:`~raftflow.stores.store.SqlStore` and its twin, accepting only
rqlite URLs (the options of :class:`~raftflow.transports.rqlite.RqliteTransport`). The
engine's store on rqlite is one of these, sharing its transport's connection
(:meth:`SqlStore.share <raftflow.stores.store.SqlStore.share>`), which is what lets a
step's checkpoint, the ack of its event and the publish of the next go in one request.
"""

from __future__ import annotations

from raftflow.stores.store import AsyncSqlStore, SqlStore
from raftflow.transports.rqlite import config_of
from raftflow.transports.rqlite.protocol import RqliteConfig

__all__ = ["AsyncRqliteStore", "RqliteStore"]


class RqliteStore(SqlStore):
    """The store on rqlite over ``httpx.Client`` (default) or ``requests.Session``."""

    requires = "rqlite"

    @property
    def config(self) -> RqliteConfig:
        """Where and how this store reaches the cluster (credentials never shown)."""
        return config_of(self.database)


class AsyncRqliteStore(AsyncSqlStore):
    """The async twin of :class:`RqliteStore`, over ``httpx.AsyncClient``."""

    requires = "rqlite"

    @property
    def config(self) -> RqliteConfig:
        """Where and how this store reaches the cluster (credentials never shown)."""
        return config_of(self.database)
