"""Transports: lease-based queues that deliver each execution's events in order.

:class:`~raftflow.transports.transport.SqlTransport` (and its async twin) is the queue on
any database: ``raftflow.transports.rqlite.RqliteTransport`` on an rqlite cluster, or
``SqlTransport.from_url("sqlite:///app.db")`` on a local file. The contract is
``raftflow.transports.contract``.
"""

from raftflow.transports.contract import PARKED, AsyncTransport, Lease, QueueStats, Transport
from raftflow.transports.transport import AsyncSqlTransport, SqlTransport

__all__ = [
    "PARKED",
    "AsyncSqlTransport",
    "AsyncTransport",
    "Lease",
    "QueueStats",
    "SqlTransport",
    "Transport",
]
