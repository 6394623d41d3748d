"""Transports: lease-based queues that deliver each execution's events in order.

``raftflow.transports.rqlite`` (RqliteTransport, AsyncRqliteTransport) and
``raftflow.transports.sqlite`` (SqliteTransport, AsyncSqliteTransport) implement the
contract in ``raftflow.transports.base``.
"""

from raftflow.transports.base import PARKED, AsyncTransport, Lease, QueueStats, Transport

__all__ = ["PARKED", "AsyncTransport", "Lease", "QueueStats", "Transport"]
