"""The store's public classes: :class:`SqlStore` and its async twin, on any database.

Both only run :class:`~raftflow.stores.flows.StoreFlows` on a
:class:`~raftflow.transports.db.database.Database`; they differ by ``await`` alone.
:class:`~raftflow.stores.rqlite.RqliteStore` is the same class on rqlite.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from raftflow.stores.contract import ExecutionRecord, StartOutcome, Status, StepRecord
from raftflow.stores.flows import StoreFlows
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
from typing_extensions import Unpack

from raftflow.errors import ConfigurationError

S = TypeVar("S", bound="SqlStore")
A = TypeVar("A", bound="AsyncSqlStore")


D = TypeVar("D", Database, AsyncDatabase)


class _Store(Generic[D]):
    """What the twins share, which does no I/O."""

    #: The database kind ``from_url`` accepts (None: any; ``RqliteStore``: rqlite).
    requires: str | None = None

    def __init__(
        self,
        database: D,
        *,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        flows: StoreFlows | None = None,
    ) -> None:
        self.database: D = database
        self.flows = flows or StoreFlows(database.clock, max_payload_bytes=max_payload_bytes)

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


class SqlStore(_Store[Database]):
    """Executions and their step records in one database (beside the queue)."""

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
        database = open_database(cls._checked(url), **options)
        store = cls(database, max_payload_bytes=max_payload_bytes)
        if create_schema:
            try:
                store.create_schema()
            except BaseException:
                store.close()
                raise
        return store

    def create_schema(self, auto_migrate: bool | None = None) -> None:
        """Create the schema, or migrate it to this code's version (:mod:`~raftflow.
        transports.schema`: an older rqlite database is refused unless ``auto_migrate``)."""
        self.database.run(ensure(self.database.embedded if auto_migrate is None else auto_migrate))

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
        return self.database.run(flow)

    def get(self, execution_id: str) -> ExecutionRecord | None:
        """The execution, or None when there is none with this id."""
        return self.database.run(self.flows.get(execution_id))

    def list(
        self, *, status: Status | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return self.database.run(self.flows.list(status, limit))

    def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        """The execution's step records in call order."""
        return self.database.run(self.flows.steps(execution_id))

    def counts(self) -> dict[Status, int]:
        """How many executions there are in each status."""
        return self.database.run(self.flows.counts())

    def children(self, execution_id: str) -> builtins.list[ExecutionRecord]:
        """The executions this one started as children, oldest first."""
        return self.database.run(self.flows.children(execution_id))

    def runs(self, execution_id: str) -> builtins.list[ExecutionRecord]:
        """The runs this execution ended with ``continue_as_new``, oldest first."""
        return self.database.run(self.flows.runs(execution_id))

    def to_async(self) -> AsyncSqlStore:
        """The async twin on the same database and clock."""
        return AsyncSqlStore(self.database.to_async(), flows=self.flows)

    def close(self) -> None:
        self.database.close()


class AsyncSqlStore(_Store[AsyncDatabase]):
    """The async twin of :class:`SqlStore`: the same operations, awaited."""

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
        database = await aopen_database(cls._checked(url), **options)
        store = cls(database, max_payload_bytes=max_payload_bytes)
        if create_schema:
            try:
                await store.create_schema()
            except BaseException:
                await store.close()
                raise
        return store

    async def create_schema(self, auto_migrate: bool | None = None) -> None:
        """Create or migrate the schema, as :meth:`SqlStore.create_schema` does."""
        auto = self.database.embedded if auto_migrate is None else auto_migrate
        await self.database.run(ensure(auto))

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
        return await self.database.run(flow)

    async def get(self, execution_id: str) -> ExecutionRecord | None:
        """The execution, or None when there is none with this id."""
        return await self.database.run(self.flows.get(execution_id))

    async def list(
        self, *, status: Status | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return await self.database.run(self.flows.list(status, limit))

    async def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        """The execution's step records in call order."""
        return await self.database.run(self.flows.steps(execution_id))

    async def counts(self) -> dict[Status, int]:
        """How many executions there are in each status."""
        return await self.database.run(self.flows.counts())

    async def children(self, execution_id: str) -> builtins.list[ExecutionRecord]:
        """The executions this one started as children, oldest first."""
        return await self.database.run(self.flows.children(execution_id))

    async def runs(self, execution_id: str) -> builtins.list[ExecutionRecord]:
        """The runs this execution ended with ``continue_as_new``, oldest first."""
        return await self.database.run(self.flows.runs(execution_id))

    async def close(self) -> None:
        await self.database.close()
