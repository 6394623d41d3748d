"""The store contract: what the engine asks of the place an execution's state is kept.

A store holds executions (status, input, outcome), the record of each call of their runs,
their signals and events; it starts executions and it applies the fenced commit of a step.
:class:`~raftflow.stores.store.SqlStore` (and :class:`~raftflow.RqliteStore`) is the
implementation on a database; its async twin is what a worker uses. Reads and writes are
described by I/O-free flows (:attr:`StoreFlows <raftflow.stores.flows.StoreFlows>`), which
the store runs; the workflow core builds its durable calls from them.

The store is told its transport (:meth:`SqlStore.share
<raftflow.stores.store.SqlStore.share>`). On one database, a commit acks the current event
and publishes the next in the same request, and a claim reads what its runs need in its
own; on two, the commit comes first and the queue after (:mod:`raftflow.stores.split`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raftflow.transports.db.clock import Clock

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.flows import StoreFlows
from raftflow.stores.records import Claimed, ExecutionRecord, StartOutcome, Status, StepRecord
from raftflow.transports.db.flow import Flow
from raftflow.transports.lanes import Lanes

T = TypeVar("T")


@runtime_checkable
class Store(Protocol):
    """Executions and their records, for clients and tools (sync)."""

    flows: StoreFlows

    def run(self, flow: Flow[T]) -> T:
        """Run one of the store's flows (:attr:`flows`)."""
        ...

    def start(
        self, execution_id: str, workflow: str, input: Any, *, event: Any, priority: int = 0
    ) -> StartOutcome:
        """Record a new execution and its first event, atomically (idempotent by id)."""
        ...

    def get(self, execution_id: str) -> ExecutionRecord | None: ...

    def list(
        self, *, status: Status | None = None, limit: int = 100
    ) -> Sequence[ExecutionRecord]: ...

    def steps(self, execution_id: str) -> Sequence[StepRecord]: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncStore(Protocol):
    """What a worker's runs need of the store (async): the reads of a claim, the history
    in pages, the fenced commit, and the store's flows."""

    @property
    def clock(self) -> Clock:
        """The clock leases and wake times are measured by."""
        ...

    flows: StoreFlows

    async def run(self, flow: Flow[T]) -> T:
        """Run one of the store's flows (a durable call's, a transaction step's read)."""
        ...

    async def claim(
        self,
        transport: Any,
        worker_id: str,
        visibility: float,
        limit: int = 1,
        min_priority: int = 0,
        cached: dict[str, tuple[str | None, int]] | None = None,
        lanes: Lanes = None,
    ) -> list[Claimed]:
        """Lease events of ``transport`` and read what their runs need, in one request."""
        ...

    async def history(
        self, execution_id: str, have: list[StepRecord], last: int
    ) -> list[StepRecord]:
        """The records of calls ``0..last``, reading in pages what ``have`` lacks."""
        ...

    async def commit(self, commits: Sequence[Commit], visibility: float) -> list[CommitOutcome]:
        """Commits of many executions in one request, each fenced by its lease."""
        ...

    @property
    def split(self) -> bool:
        """Whether its transport is on another database (:mod:`raftflow.stores.split`)."""
        ...

    async def relay(self) -> None:
        """Publish to the transport what the store holds for it (a split pair's)."""
        ...

    async def close(self) -> None: ...
