"""The store's public classes: :class:`SqlStore` and its async twin, on any database.

Both run the store's I/O-free flows on a :class:`~raftflow.transports.db.database.
Database` (:mod:`raftflow.stores.flows` for executions, :mod:`raftflow.stores.commit_flow`
for the fenced commit, :mod:`raftflow.stores.claim` for what a claim reads); they differ by
``await`` alone. :class:`~raftflow.stores.rqlite.RqliteStore` is the same class on rqlite.

**Sharing the transport's database.** On the database of the queue
(:class:`~raftflow.transports.transport.SqlTransport`), the store's commit carries the ack of
the current event and the publish of the next in the same request and Raft entry, and a
claim reads what its runs need in the claim's own transaction. That is a capability of the
pair: :meth:`SqlStore.share` tells the store its transport, whose connection it then uses.
Told a transport on another database, the store keeps its own connection and works with
it as :mod:`raftflow.stores.split` describes: the commit first, then the queue.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
from collections.abc import Sequence
from typing import Any, TypeVar

from raftflow.stores import claim as claim_reads
from raftflow.stores import split
from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.commit_flow import CommitFlows
from raftflow.stores.flows import StoreFlows
from raftflow.stores.records import Claimed, ExecutionRecord, StartOutcome, Status, StepRecord
from raftflow.transports.db.component import AsyncComponent, Component, SyncComponent
from raftflow.transports.db.database import AsyncDatabase, ConnectOptions, Database
from raftflow.transports.db.flow import Flow
from raftflow.transports.lanes import Lanes
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.transport import AsyncSqlTransport, SqlTransport
from typing_extensions import Unpack

log = logging.getLogger("raftflow")

S = TypeVar("S", bound="SqlStore")
A = TypeVar("A", bound="AsyncSqlStore")
D = TypeVar("D", Database, AsyncDatabase)
T = TypeVar("T")


class _Store(Component[D]):
    """What the twins share: the store's flows (one object for a twin pair)."""

    def __init__(
        self,
        database: D,
        *,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        flows: StoreFlows | None = None,
        commits: CommitFlows | None = None,
    ) -> None:
        self.database = database
        self.flows = flows or StoreFlows(database.clock, max_payload_bytes=max_payload_bytes)
        self.commits = commits or CommitFlows(database.clock)


class SqlStore(_Store[Database], SyncComponent):
    """Executions and their step records in one database (beside the queue)."""

    #: The transport when it is on another database (:meth:`share`), else None.
    queue: SqlTransport | None = None

    @classmethod
    def from_url(
        cls: type[S],
        url: str | Sequence[str],
        *,
        create_schema: bool = True,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        **options: Unpack[ConnectOptions],
    ) -> S:
        """Connect as :meth:`SqlTransport.from_url
        <raftflow.transports.transport.SqlTransport.from_url>` does and create the schema."""

        def make(database: Database) -> S:
            return cls(database, max_payload_bytes=max_payload_bytes)

        return cls._open(url, make, create_schema, options)

    @property
    def max_payload_bytes(self) -> int:
        return self.flows.max_payload_bytes

    def share(self, transport: SqlTransport) -> None:
        """Work with ``transport``. On its database, use its connection from now on
        (closing this store's own): the store's commits then settle the transport's leases
        in the same request. On another, keep both (:mod:`raftflow.stores.split`): what
        the store publishes is relayed to the transport after each write."""
        if transport.database is self.database:
            return
        if transport.database.identity != self.database.identity:
            self.queue = transport
            self.flows.split, self.commits.holds = True, False
            return
        own, self.database = self.database, transport.database
        self.flows.clock = self.commits.clock = transport.database.clock
        own.close()

    def run(self, flow: Flow[T]) -> T:
        """Run one of the store's flows; on a split pair, relay what its writes published."""
        if self.queue is None:
            return self.database.run(flow)
        wrote: list[bool] = []
        result = self.database.run(split.watched(flow, wrote))
        if wrote:
            try:
                self.relay()
            except Exception as exc:  # it stands in the store: a worker's relay moves it
                log.warning(split.RELAY_LATER, exc)
        return result

    @property
    def split(self) -> bool:
        """Whether its transport is on another database (:mod:`raftflow.stores.split`)."""
        return self.queue is not None

    def relay(self) -> None:
        """Publish to the transport what this store holds for it (split pairs only)."""
        if self.queue is not None:  # a batch; the next write's relay takes the rest
            rows = self.database.run(split.due(self.clock))
            rows = self.database.run(split.keep(self.clock, rows))
            self.queue.run(split.publish(self.queue.flows, rows, ()))
            self.database.run(split.forget(rows))

    def start(
        self,
        execution_id: str,
        workflow: str,
        input: Any,
        *,
        event: Any,
        priority: int = 0,
        timeout: float | None = None,
        trace_context: str | None = None,
    ) -> StartOutcome:
        """Record a new execution and publish its first ``event``, atomically; an existing
        ``execution_id`` is returned as it is (``created`` false). ``timeout``: its
        deadline, that many seconds from now; ``trace_context``: the caller's trace (JSON
        W3C context), continued by the workers' spans."""
        flow = self.flows.start(
            execution_id,
            workflow,
            input,
            priority,
            event,
            timeout=timeout,
            trace_context=trace_context,
        )
        return self.run(flow)

    def get(self, execution_id: str) -> ExecutionRecord | None:
        """The execution, or None when there is none with this id."""
        return self.run(self.flows.get(execution_id))

    def list(
        self, *, status: Status | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return self.run(self.flows.list(status, limit))

    def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        """The execution's step records in call order."""
        return self.run(self.flows.steps(execution_id))

    def counts(self) -> dict[Status, int]:
        """How many executions there are in each status."""
        return self.run(self.flows.counts())

    def children(self, execution_id: str) -> builtins.list[ExecutionRecord]:
        """The executions this one started as children, oldest first."""
        return self.run(self.flows.children(execution_id))

    def runs(self, execution_id: str) -> builtins.list[ExecutionRecord]:
        """The runs this execution ended with ``continue_as_new``, oldest first."""
        return self.run(self.flows.runs(execution_id))

    def claim(
        self,
        transport: SqlTransport,
        worker_id: str,
        visibility: float,
        limit: int = 1,
        min_priority: int = 0,
        cached: dict[str, tuple[str | None, int]] | None = None,
        lanes: Lanes = None,
    ) -> builtins.list[Claimed]:
        """Lease up to ``limit`` events of ``transport`` for runs settled by this store's
        commits, with what the runs need (a worker's claim: :meth:`AsyncSqlStore.claim`)."""
        flow = claim_reads.claim_runs(
            transport.flows, worker_id, visibility, limit, min_priority, cached, lanes
        )
        return self.run(flow)

    def to_async(self, transport: AsyncSqlTransport | None = None) -> AsyncSqlStore:
        """The async twin with the same flows and clock: on ``transport``'s connection (the
        twin of the transport this store shares), else on a new one to its database; a
        split pair's twin works with ``transport`` on its own new connection."""
        if self.queue is not None:
            twin = AsyncSqlStore(self.database.to_async(), flows=self.flows, commits=self.commits)
            twin.queue, twin.owns_queue = transport or self.queue.to_async(), transport is None
            return twin
        database = transport.database if transport is not None else self.database.to_async()
        return AsyncSqlStore(database, flows=self.flows, commits=self.commits)


class AsyncSqlStore(_Store[AsyncDatabase], AsyncComponent):
    """The async twin of :class:`SqlStore`; also what a worker's runs need of the store:
    the reads of a claim, the history in pages, and the commit."""

    #: The transport when it is on another database, else None.
    queue: AsyncSqlTransport | None = None
    #: Whether it opened that transport itself (closed with it).
    owns_queue = False

    async def close(self) -> None:
        await self.database.close()
        if self.owns_queue and self.queue is not None:
            await self.queue.close()

    @classmethod
    async def from_url(
        cls: type[A],
        url: str | Sequence[str],
        *,
        create_schema: bool = True,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        **options: Unpack[ConnectOptions],
    ) -> A:
        """Connect as :meth:`SqlStore.from_url` does, awaiting the wait and schema."""

        def make(database: AsyncDatabase) -> A:
            return cls(database, max_payload_bytes=max_payload_bytes)

        return await cls._open(url, make, create_schema, options)

    async def start(
        self,
        execution_id: str,
        workflow: str,
        input: Any,
        *,
        event: Any,
        priority: int = 0,
        timeout: float | None = None,
        trace_context: str | None = None,
    ) -> StartOutcome:
        """Record a new execution and publish its first ``event``, atomically."""
        flow = self.flows.start(
            execution_id,
            workflow,
            input,
            priority,
            event,
            timeout=timeout,
            trace_context=trace_context,
        )
        return await self.run(flow)

    async def get(self, execution_id: str) -> ExecutionRecord | None:
        """The execution, or None when there is none with this id."""
        return await self.run(self.flows.get(execution_id))

    async def list(
        self, *, status: Status | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return await self.run(self.flows.list(status, limit))

    async def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        """The execution's step records in call order."""
        return await self.run(self.flows.steps(execution_id))

    async def counts(self) -> dict[Status, int]:
        """How many executions there are in each status."""
        return await self.run(self.flows.counts())

    async def children(self, execution_id: str) -> builtins.list[ExecutionRecord]:
        """The executions this one started as children, oldest first."""
        return await self.run(self.flows.children(execution_id))

    async def runs(self, execution_id: str) -> builtins.list[ExecutionRecord]:
        """The runs this execution ended with ``continue_as_new``, oldest first."""
        return await self.run(self.flows.runs(execution_id))

    # -- a worker's runs ------------------------------------------------------------------

    async def claim(
        self,
        transport: AsyncSqlTransport,
        worker_id: str,
        visibility: float,
        limit: int = 1,
        min_priority: int = 0,
        cached: dict[str, tuple[str | None, int]] | None = None,
        lanes: Lanes = None,
    ) -> builtins.list[Claimed]:
        """Lease up to ``limit`` events of ``transport`` (whose database this store shares),
        of the ``lanes`` the worker serves (None: any), and read, in the same request, what
        their runs need -- except the history of the runs the worker keeps (``cached``:
        their fingerprints) and finds unchanged."""
        if self.queue is not None:  # on two databases: the lease, then its mirror here
            claim = await transport.run(
                transport.flows.claim(
                    worker_id, visibility, limit, min_priority, lanes=lanes, track=False
                )
            )
            if not claim.leases:
                return []
            try:
                return await self.database.run(split.adopt(self.clock, claim.leases, cached))
            except BaseException:
                with contextlib.suppress(Exception):
                    await transport.release_leases(claim.leases)
                raise
        flow = claim_reads.claim_runs(
            transport.flows, worker_id, visibility, limit, min_priority, cached, lanes
        )
        return await self.run(flow)

    async def history(
        self, execution_id: str, have: builtins.list[StepRecord], last: int
    ) -> builtins.list[StepRecord]:
        """The records of calls ``0..last``, reading in pages what ``have`` lacks."""
        return await self.run(claim_reads.history(execution_id, have, last))

    async def commit(
        self, commits: Sequence[Commit], visibility: float
    ) -> builtins.list[CommitOutcome]:
        """Many executions' commits in one request (one Raft entry), each fenced by its
        lease and atomic on its own; a next event kept by the worker is leased for
        ``visibility`` seconds. On two databases, the commits first (fenced by the
        leases' mirrors), then the ack of the turns they end, with the relay."""
        if self.queue is None:
            return await self.run(self.commits.commit(commits, visibility))
        applied = await self.database.run(self.commits.commit(split.for_store(commits), visibility))
        outcomes = split.settled(commits, applied)
        acks = split.ended(commits, outcomes)
        if not acks:  # steps recorded within their turns: nothing published, nothing to ack
            return outcomes
        try:
            await self._relay(acks)
        except Exception as exc:  # the commits stand: an unacked event is delivered again
            log.warning(split.RELAY_LATER, exc)
        return outcomes

    async def run(self, flow: Flow[T]) -> T:
        """Run one of the store's flows; on a split pair, relay what its writes published."""
        if self.queue is None:
            return await self.database.run(flow)
        wrote: list[bool] = []
        result = await self.database.run(split.watched(flow, wrote))
        if wrote:
            try:
                await self.relay()
            except Exception as exc:  # it stands in the store: the next relay moves it
                log.warning(split.RELAY_LATER, exc)
        return result

    @property
    def split(self) -> bool:
        """Whether its transport is on another database (:mod:`raftflow.stores.split`)."""
        return self.queue is not None

    async def relay(self) -> None:
        """Publish to the transport what this store holds for it (split pairs only)."""
        await self._relay(())

    async def _relay(self, acks: Sequence[tuple[int, str]]) -> None:
        """:meth:`relay`, with ``acks``: the transport's leases of the turns just ended."""
        if self.queue is not None:  # a batch; the next relay takes the rest
            rows = await self.database.run(split.due(self.clock))
            rows = await self.database.run(split.keep(self.clock, rows))
            await self.queue.run(split.publish(self.queue.flows, rows, acks))
            await self.database.run(split.forget(rows))
