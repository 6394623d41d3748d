"""The queue's public classes: :class:`SqlTransport` and its async twin, on any database.

Both only run :class:`~raftflow.transports.queue.QueueFlows` on a
:class:`~raftflow.transports.db.database.Database`; they differ by ``await`` alone.
:class:`~raftflow.transports.rqlite.RqliteTransport` is the spec's name for the same class on
rqlite; ``SqlTransport.from_url("sqlite:///app.db")`` is the queue on a local file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from raftflow.transports.contract import Lease, QueueStats
from raftflow.transports.db.component import AsyncComponent, Component, SyncComponent
from raftflow.transports.db.database import AsyncDatabase, ConnectOptions, Database
from raftflow.transports.lanes import Lanes
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.queue import QueueFlows
from typing_extensions import Unpack

S = TypeVar("S", bound="SqlTransport")
A = TypeVar("A", bound="AsyncSqlTransport")
D = TypeVar("D", Database, AsyncDatabase)


class _Queue(Component[D]):
    """What the twins share: the queue's flows (one object for a twin pair, so the leases
    either one issued are the other's too)."""

    def __init__(
        self,
        database: D,
        *,
        max_event_bytes: int = MAX_PAYLOAD_BYTES,
        dedup_window: float = 900.0,
        flows: QueueFlows | None = None,
    ) -> None:
        self.database = database
        self.flows = flows or QueueFlows(
            database.clock, max_event_bytes=max_event_bytes, dedup_window=dedup_window
        )


class SqlTransport(_Queue[Database], SyncComponent):
    """A lease-based queue, FIFO and exclusive per group, in one database."""

    @classmethod
    def from_url(
        cls: type[S],
        url: str | Sequence[str],
        *,
        create_schema: bool = True,
        max_event_bytes: int = MAX_PAYLOAD_BYTES,
        dedup_window: float = 900.0,
        **options: Unpack[ConnectOptions],
    ) -> S:
        """Connect to ``url`` and create the queue's schema if asked.

        ``http(s)://[user:pass@]host:port[,host:port...]`` is rqlite: it waits up to
        ``connect_timeout`` for a leader with a quorum, then raises
        :class:`~raftflow.errors.UnavailableError` (no cluster) or
        :class:`~raftflow.errors.AuthenticationError` (credentials refused).
        ``sqlite:///path.db`` is a local file. The connection ``options`` are
        :class:`~raftflow.transports.db.database.ConnectOptions`.
        """

        def make(database: Database) -> S:
            return cls(database, max_event_bytes=max_event_bytes, dedup_window=dedup_window)

        return cls._open(url, make, create_schema, options)

    def publish(
        self,
        group_id: str,
        event: Any,
        priority: int = 0,
        *,
        key: str | None = None,
        lane: str | None = None,
    ) -> None:
        """Append ``event`` (JSON-serializable) to ``group_id``; 1 round trip.

        ``priority`` (0-4) and ``lane`` are the group's, set by its first publish: a claim
        that names lanes takes only groups of those (``""`` when none is named). ``key``
        makes the publish idempotent: a second publish with the same key within the dedup
        window adds nothing (one is generated when omitted, which makes retries safe).
        """
        self.run(self.flows.publish(group_id, event, priority, key, lane))

    def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0, *, lanes: Lanes = None
    ) -> Lease | None:
        """Lease the oldest message of the next group in round-robin order; 1 round trip.

        Returns None when nothing is claimable. The lease lasts ``visibility`` seconds.
        ``lanes``: only groups of these lanes (None: any group).
        """
        leases = self.claim_many(worker_id, visibility, 1, min_priority, lanes=lanes)
        return leases[0] if leases else None

    def claim_many(
        self,
        worker_id: str,
        visibility: float,
        limit: int,
        min_priority: int = 0,
        *,
        lanes: Lanes = None,
    ) -> list[Lease]:
        """Lease the heads of up to ``limit`` groups in one statement; 1 round trip."""
        claim = self.flows.claim(worker_id, visibility, limit, min_priority, lanes=lanes)
        return self.run(claim).leases

    def claimable(self, min_priority: int = 0, *, lanes: Lanes = None) -> bool:
        """Whether a claim would find a message now (a read: no Raft entry)."""
        return self.run(self.flows.claimable(min_priority, lanes))

    def ack(self, lease: Lease) -> None:
        """Delete the leased message; its group row goes with the last message."""
        self.run(self.flows.ack(lease))

    def nack(self, lease: Lease, delay: float = 0) -> None:
        """Give the message back: claimable again now, or after ``delay`` seconds (parked,
        keeping its group blocked until then)."""
        self.run(self.flows.nack(lease, delay))

    def extend(self, lease: Lease, visibility: float) -> Lease:
        """Push the lease deadline to ``visibility`` seconds from now (a heartbeat)."""
        return self.run(self.flows.extend(lease, visibility))

    def stats(self) -> QueueStats:
        """Counts of messages, leased, parked and groups (a strong read)."""
        return self.run(self.flows.stats())

    def to_async(self) -> AsyncSqlTransport:
        """The async twin on the same database, sharing this transport's leases and clock."""
        return AsyncSqlTransport(self.database.to_async(), flows=self.flows)


class AsyncSqlTransport(_Queue[AsyncDatabase], AsyncComponent):
    """The async twin of :class:`SqlTransport`: the same operations, awaited; and a
    worker's, on leases its store's commits settle (claimed untracked)."""

    @classmethod
    async def from_url(
        cls: type[A],
        url: str | Sequence[str],
        *,
        create_schema: bool = True,
        max_event_bytes: int = MAX_PAYLOAD_BYTES,
        dedup_window: float = 900.0,
        **options: Unpack[ConnectOptions],
    ) -> A:
        """Connect as :meth:`SqlTransport.from_url` does, awaiting the wait and schema."""

        def make(database: AsyncDatabase) -> A:
            return cls(database, max_event_bytes=max_event_bytes, dedup_window=dedup_window)

        return await cls._open(url, make, create_schema, options)

    async def publish(
        self,
        group_id: str,
        event: Any,
        priority: int = 0,
        *,
        key: str | None = None,
        lane: str | None = None,
    ) -> None:
        """Append ``event`` (JSON-serializable) to ``group_id``; 1 round trip."""
        await self.run(self.flows.publish(group_id, event, priority, key, lane))

    async def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0, *, lanes: Lanes = None
    ) -> Lease | None:
        """Lease the oldest message of the next group in round-robin order; 1 round trip."""
        leases = await self.claim_many(worker_id, visibility, 1, min_priority, lanes=lanes)
        return leases[0] if leases else None

    async def claim_many(
        self,
        worker_id: str,
        visibility: float,
        limit: int,
        min_priority: int = 0,
        *,
        lanes: Lanes = None,
    ) -> list[Lease]:
        """Lease the heads of up to ``limit`` groups in one statement; 1 round trip."""
        claim = self.flows.claim(worker_id, visibility, limit, min_priority, lanes=lanes)
        return (await self.run(claim)).leases

    async def claimable(self, min_priority: int = 0, *, lanes: Lanes = None) -> bool:
        """Whether a claim would find a message now (a read: no Raft entry)."""
        return await self.run(self.flows.claimable(min_priority, lanes))

    async def ack(self, lease: Lease) -> None:
        """Delete the leased message; its group row goes with the last message."""
        await self.run(self.flows.ack(lease))

    async def nack(self, lease: Lease, delay: float = 0) -> None:
        """Give the message back, now or parked for ``delay`` seconds."""
        await self.run(self.flows.nack(lease, delay))

    async def extend(self, lease: Lease, visibility: float) -> Lease:
        """Push the lease deadline to ``visibility`` seconds from now (a heartbeat)."""
        return await self.run(self.flows.extend(lease, visibility))

    async def stats(self) -> QueueStats:
        """Counts of messages, leased, parked and groups (a strong read)."""
        return await self.run(self.flows.stats())

    # -- a worker's: leases settled by its store's commits --------------------------------

    async def extend_leases(self, leases: Sequence[Lease], visibility: float) -> list[Lease | None]:
        """Renew several leases in one request (a heartbeat); None for each one lost."""
        return await self.run(self.flows.extend_leases(leases, visibility))

    async def release_leases(self, leases: Sequence[Lease], delay: float = 0.0) -> None:
        """Give leases back: claimable at once, or parked for ``delay`` seconds."""
        await self.run(self.flows.release_leases(leases, delay))

    async def release_group(self, group_id: str, token: str, delay: float = 0.0) -> None:
        """Give back whatever message of ``group_id`` ``token`` holds, now or after ``delay``
        (a hand-back after a failure outside user code)."""
        await self.run(self.flows.release_group(group_id, token, delay))

    async def ack_leases(self, leases: Sequence[Lease]) -> None:
        """Delete events that have nothing to run (their execution is gone or finished)."""
        await self.run(self.flows.ack_leases(leases))
