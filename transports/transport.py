"""The queue's public classes: :class:`SqlTransport` and its async twin, on any database.

Both only run :class:`~raftflow.transports.queue.QueueFlows` on a
:class:`~raftflow.transports.db.database.Database`; they differ by ``await`` alone.
:class:`~raftflow.transports.rqlite.RqliteTransport` is the spec's name for the same class on
rqlite; ``SqlTransport.from_url("sqlite:///app.db")`` is the queue on a local file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from raftflow.transports.contract import Lease, QueueStats
from raftflow.transports.db.database import (
    AsyncDatabase,
    ConnectOptions,
    Database,
    aopen_database,
    open_database,
    scheme_of,
)
from raftflow.transports.db.schema import ensure
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.queue import QueueFlows
from typing_extensions import Unpack

from raftflow.errors import ConfigurationError

S = TypeVar("S", bound="SqlTransport")
A = TypeVar("A", bound="AsyncSqlTransport")


D = TypeVar("D", Database, AsyncDatabase)


class _Queue(Generic[D]):
    """What the twins share, which does no I/O (httpx's ``BaseClient`` shape)."""

    #: The database kind ``from_url`` accepts (None: any; ``RqliteTransport``: rqlite).
    requires: str | None = None

    def __init__(
        self,
        database: D,
        *,
        max_event_bytes: int = MAX_PAYLOAD_BYTES,
        dedup_window: float = 900.0,
        flows: QueueFlows | None = None,
    ) -> None:
        self.database: D = database
        self.flows = flows or QueueFlows(
            database.clock, max_event_bytes=max_event_bytes, dedup_window=dedup_window
        )

    @property
    def connection(self) -> Any:
        return self.database.connection

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.database.connection!r}>"

    @classmethod
    def _checked(cls, url: str | Sequence[str]) -> str | Sequence[str]:
        if cls.requires is not None and scheme_of(url) != cls.requires:
            raise ConfigurationError(f"{cls.__name__} needs an {cls.requires} URL")
        return url


class SqlTransport(_Queue[Database]):
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
        database = open_database(cls._checked(url), **options)
        transport = cls(database, max_event_bytes=max_event_bytes, dedup_window=dedup_window)
        if create_schema:
            try:
                transport.create_schema()
            except BaseException:
                transport.close()
                raise
        return transport

    def create_schema(self, auto_migrate: bool | None = None) -> None:
        """Create the schema, or migrate it to this code's version (:mod:`~raftflow.
        transports.schema`: an older rqlite database is refused unless ``auto_migrate``)."""
        self.database.run(ensure(self.database.embedded if auto_migrate is None else auto_migrate))

    def publish(
        self, group_id: str, event: Any, priority: int = 0, *, key: str | None = None
    ) -> None:
        """Append ``event`` (JSON-serializable) to ``group_id``; 1 round trip.

        ``priority`` (0-4) is the group's, set by its first publish. ``key`` makes the
        publish idempotent: a second publish with the same key within the dedup window
        adds nothing (one is generated when omitted, which makes retries safe).
        """
        self.database.run(self.flows.publish(group_id, event, priority, key))

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Lease | None:
        """Lease the oldest message of the next group in round-robin order; 1 round trip.

        Returns None when nothing is claimable. The lease lasts ``visibility`` seconds.
        """
        leases = self.claim_many(worker_id, visibility, 1, min_priority)
        return leases[0] if leases else None

    def claim_many(
        self, worker_id: str, visibility: float, limit: int, min_priority: int = 0
    ) -> list[Lease]:
        """Lease the heads of up to ``limit`` groups in one statement; 1 round trip."""
        claim = self.flows.claim(worker_id, visibility, limit, min_priority)
        return self.database.run(claim).leases

    def claimable(self, min_priority: int = 0) -> bool:
        """Whether a claim would find a message now (a read: no Raft entry)."""
        return self.database.run(self.flows.claimable(min_priority))

    def ack(self, lease: Lease) -> None:
        """Delete the leased message; its group row goes with the last message."""
        self.database.run(self.flows.ack(lease))

    def nack(self, lease: Lease, delay: float = 0) -> None:
        """Give the message back: claimable again now, or after ``delay`` seconds (parked,
        keeping its group blocked until then)."""
        self.database.run(self.flows.nack(lease, delay))

    def extend(self, lease: Lease, visibility: float) -> Lease:
        """Push the lease deadline to ``visibility`` seconds from now (a heartbeat)."""
        return self.database.run(self.flows.extend(lease, visibility))

    def stats(self) -> QueueStats:
        """Counts of messages, leased, parked and groups (a strong read)."""
        return self.database.run(self.flows.stats())

    def to_async(self) -> AsyncSqlTransport:
        """The async twin on the same database, sharing this transport's leases and clock."""
        return AsyncSqlTransport(self.database.to_async(), flows=self.flows)

    def close(self) -> None:
        self.database.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncSqlTransport(_Queue[AsyncDatabase]):
    """The async twin of :class:`SqlTransport`: the same operations, awaited."""

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
        database = await aopen_database(cls._checked(url), **options)
        transport = cls(database, max_event_bytes=max_event_bytes, dedup_window=dedup_window)
        if create_schema:
            try:
                await transport.create_schema()
            except BaseException:
                await transport.close()
                raise
        return transport

    async def create_schema(self, auto_migrate: bool | None = None) -> None:
        """Create or migrate the schema, as :meth:`SqlTransport.create_schema` does."""
        auto = self.database.embedded if auto_migrate is None else auto_migrate
        await self.database.run(ensure(auto))

    async def publish(
        self, group_id: str, event: Any, priority: int = 0, *, key: str | None = None
    ) -> None:
        """Append ``event`` (JSON-serializable) to ``group_id``; 1 round trip."""
        await self.database.run(self.flows.publish(group_id, event, priority, key))

    async def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Lease | None:
        """Lease the oldest message of the next group in round-robin order; 1 round trip."""
        leases = await self.claim_many(worker_id, visibility, 1, min_priority)
        return leases[0] if leases else None

    async def claim_many(
        self, worker_id: str, visibility: float, limit: int, min_priority: int = 0
    ) -> list[Lease]:
        """Lease the heads of up to ``limit`` groups in one statement; 1 round trip."""
        claim = self.flows.claim(worker_id, visibility, limit, min_priority)
        return (await self.database.run(claim)).leases

    async def claimable(self, min_priority: int = 0) -> bool:
        """Whether a claim would find a message now (a read: no Raft entry)."""
        return await self.database.run(self.flows.claimable(min_priority))

    async def ack(self, lease: Lease) -> None:
        """Delete the leased message; its group row goes with the last message."""
        await self.database.run(self.flows.ack(lease))

    async def nack(self, lease: Lease, delay: float = 0) -> None:
        """Give the message back, now or parked for ``delay`` seconds."""
        await self.database.run(self.flows.nack(lease, delay))

    async def extend(self, lease: Lease, visibility: float) -> Lease:
        """Push the lease deadline to ``visibility`` seconds from now (a heartbeat)."""
        return await self.database.run(self.flows.extend(lease, visibility))

    async def stats(self) -> QueueStats:
        """Counts of messages, leased, parked and groups (a strong read)."""
        return await self.database.run(self.flows.stats())

    async def close(self) -> None:
        await self.database.close()

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
