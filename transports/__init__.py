"""Transports: lease-based queues that deliver each execution's events in order.

``transports.rqlite`` (RqliteTransport, AsyncRqliteTransport) and ``transports.sqlite``
(SqliteTransport, AsyncSqliteTransport) implement the contract in ``transports.base``.
"""

from transports.base import PARKED, AsyncTransport, Lease, QueueStats, Transport

__all__ = ["PARKED", "AsyncTransport", "Lease", "QueueStats", "Transport"]
