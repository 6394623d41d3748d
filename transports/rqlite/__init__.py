"""RqliteTransport: the Raft-replicated, lease-based queue on an rqlite cluster.

The design is the spec of ``RqliteTransport`` (schema, the single-statement claim,
publish/claim/ack/nack, ``from_url``, the async twin); where this
implementation deviates it does better at equal semantics, and says so where it does:
the claim is one HTTP round trip and one Raft entry instead of three requests
(:mod:`raftflow.transports.queue`), a group's availability is cached in ``groups.ready_at``
so the claim's cost does not grow with the queue (``transports/queue.sql``), lease times
come from the leader's clock instead of each worker's (:mod:`raftflow.transports.db.clock`),
and requests move to another node and retry safely across leader changes
(:mod:`raftflow.transports.rqlite.protocol`).

The classes are :class:`~raftflow.transports.transport.SqlTransport` and its twin,
accepting only rqlite URLs::

    RqliteTransport.from_url(
        "http://user:secret@10.0.0.1:4001,10.0.0.2:4001",
        http="raftflow",         # or "httpx", or "requests" (pip install 'raftflow[requests]')
        verify=True,             # False, or the path of a CA bundle
        timeout=10.0,            # one HTTP attempt
        retry_timeout=15.0,      # all the attempts of one request
        connect_timeout=30.0,    # the wait for a leader with a quorum
        create_schema=True,
    )
"""

from __future__ import annotations

from raftflow.transports.db.database import AsyncDatabase, Database
from raftflow.transports.rqlite.client import AsyncRqliteConnection, RqliteConnection
from raftflow.transports.rqlite.protocol import RqliteConfig
from raftflow.transports.transport import AsyncSqlTransport, SqlTransport

from raftflow.errors import ConfigurationError

__all__ = ["AsyncRqliteTransport", "RqliteConfig", "RqliteTransport"]


class RqliteTransport(SqlTransport):
    """The queue on rqlite over raftflow's own HTTP/1.1 sockets (default), ``httpx.Client``
    or ``requests.Session`` (``http=``; :mod:`raftflow.transports.rqlite.wire`)."""

    requires = "rqlite"

    @property
    def config(self) -> RqliteConfig:
        """Where and how this transport reaches the cluster (credentials never shown)."""
        return config_of(self.database)


class AsyncRqliteTransport(AsyncSqlTransport):
    """The async twin of :class:`RqliteTransport`. The spec names ``httpx.AsyncClient``
    (``http="httpx"``); the default is raftflow's own sockets, the same requests for less
    work each (:mod:`raftflow.transports.rqlite.wire`)."""

    requires = "rqlite"

    @property
    def config(self) -> RqliteConfig:
        """Where and how this transport reaches the cluster (credentials never shown)."""
        return config_of(self.database)


def config_of(database: Database | AsyncDatabase) -> RqliteConfig:
    """The config of an rqlite database's connection."""
    connection = database.connection
    if not isinstance(connection, (RqliteConnection, AsyncRqliteConnection)):
        raise ConfigurationError(f"{database!r} is not on rqlite")
    return connection.config
