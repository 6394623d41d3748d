"""The store over any connection: the sync and async twins of every store.

Both classes only drive :class:`~raftflow.stores.ops.StoreFlows` over a connection; they differ by
``await`` alone. :class:`~raftflow.stores.rqlite.RqliteStore` and
:class:`~raftflow.stores.sqlite.SqliteStore` add how to connect.
"""

from __future__ import annotations

import builtins
from typing import Any

from raftflow.stores.base import ExecutionRecord, StartOutcome, Status, StepRecord
from raftflow.stores.ops import StoreFlows
from raftflow.transports.db import AsyncConnection, Connection, adrive, drive


class SqlStore:
    """Executions and step records in a SQL database reached through a sync connection."""

    def __init__(self, connection: Connection, flows: StoreFlows) -> None:
        self.connection = connection
        self.flows = flows

    def create_schema(self) -> None:
        """Create the store's tables (and the queue's, which its commits write)."""
        drive(self.connection, self.flows.create_schema())

    def start(
        self, execution_id: str, workflow: str, input: Any, *, event: Any, priority: int = 0
    ) -> StartOutcome:
        """Record a new execution and publish its first ``event``, atomically; an existing
        ``execution_id`` is returned as it is (``created`` false)."""
        return drive(
            self.connection, self.flows.start(execution_id, workflow, input, priority, event)
        )

    def get(self, execution_id: str) -> ExecutionRecord | None:
        """The execution, or None when there is none with this id."""
        return drive(self.connection, self.flows.get(execution_id))

    def list(
        self, *, status: Status | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return drive(self.connection, self.flows.list(status, limit))

    def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        """The execution's step records in call order."""
        return drive(self.connection, self.flows.steps(execution_id))

    def counts(self) -> dict[Status, int]:
        """How many executions there are in each status."""
        return drive(self.connection, self.flows.counts())

    def close(self) -> None:
        self.connection.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.connection!r}>"


class AsyncSqlStore:
    """The async twin of :class:`SqlStore`: the same operations, awaited."""

    def __init__(self, connection: AsyncConnection, flows: StoreFlows) -> None:
        self.connection = connection
        self.flows = flows

    async def create_schema(self) -> None:
        """Create the store's tables (and the queue's, which its commits write)."""
        await adrive(self.connection, self.flows.create_schema())

    async def start(
        self, execution_id: str, workflow: str, input: Any, *, event: Any, priority: int = 0
    ) -> StartOutcome:
        """Record a new execution and publish its first ``event``, atomically."""
        return await adrive(
            self.connection, self.flows.start(execution_id, workflow, input, priority, event)
        )

    async def get(self, execution_id: str) -> ExecutionRecord | None:
        """The execution, or None when there is none with this id."""
        return await adrive(self.connection, self.flows.get(execution_id))

    async def list(
        self, *, status: Status | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return await adrive(self.connection, self.flows.list(status, limit))

    async def steps(self, execution_id: str) -> builtins.list[StepRecord]:
        """The execution's step records in call order."""
        return await adrive(self.connection, self.flows.steps(execution_id))

    async def counts(self) -> dict[Status, int]:
        """How many executions there are in each status."""
        return await adrive(self.connection, self.flows.counts())

    async def close(self) -> None:
        await self.connection.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.connection!r}>"
