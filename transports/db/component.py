"""What the queue's and the store's public classes share: one database, opened by URL.

:class:`SqlTransport <raftflow.transports.transport.SqlTransport>` and :class:`SqlStore
<raftflow.stores.store.SqlStore>` (and their async twins) are each a set of I/O-free flows
run on a :class:`~raftflow.transports.db.database.Database`. Opening by URL, creating or
migrating the schema, running a flow and closing are the same for both, and written here
once: the sync :class:`SyncComponent` and the async :class:`AsyncComponent` differ only by
``await`` (httpx's ``BaseClient`` shape).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from raftflow.transports.db.clock import Clock
from raftflow.transports.db.database import (
    AsyncDatabase,
    ConnectOptions,
    Database,
    aopen_database,
    open_database,
    scheme_of,
)
from raftflow.transports.db.flow import Flow
from raftflow.transports.db.schema import ensure

from raftflow.errors import ConfigurationError

T = TypeVar("T")
D = TypeVar("D", Database, AsyncDatabase)
S = TypeVar("S", bound="SyncComponent")
A = TypeVar("A", bound="AsyncComponent")


class Component(Generic[D]):
    """A database and what does no I/O."""

    #: The database kind ``from_url`` accepts (None: any; ``"rqlite"``: an rqlite cluster).
    requires: ClassVar[str | None] = None

    def __init__(self, database: D) -> None:
        self.database: D = database

    @property
    def connection(self) -> Any:
        return self.database.connection

    @property
    def round_trips(self) -> int:
        """Requests this component's connection has sent (a count, where it keeps one)."""
        return int(getattr(self.database.connection, "round_trips", 0))

    @property
    def clock(self) -> Clock:
        """The clock its leases and times are measured by (the cluster's, on rqlite)."""
        return self.database.clock

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.database.connection!r}>"

    @classmethod
    def _checked(cls, url: str | Sequence[str]) -> str | Sequence[str]:
        if cls.requires is not None and scheme_of(url) != cls.requires:
            raise ConfigurationError(f"{cls.__name__} needs an {cls.requires} URL")
        return url


class SyncComponent(Component[Database]):
    """The sync side: flows run on a :class:`Database`."""

    @classmethod
    def _open(
        cls: type[S],
        url: str | Sequence[str],
        make: Callable[[Database], S],
        create_schema: bool,
        options: ConnectOptions,
    ) -> S:
        """``make`` on the database of ``url``, its schema created if asked (closed again
        if that fails)."""
        component = make(open_database(cls._checked(url), **options))
        if create_schema:
            try:
                component.create_schema()
            except BaseException:
                component.close()
                raise
        return component

    def create_schema(self, auto_migrate: bool | None = None) -> None:
        """Create the schema, or migrate it to this code's version (:mod:`~raftflow.
        transports.db.schema`: an older rqlite database is refused unless ``auto_migrate``;
        None: migrate a SQLite file, not rqlite)."""
        self.database.run(ensure(self.database.embedded if auto_migrate is None else auto_migrate))

    def run(self, flow: Flow[T]) -> T:
        """Run one of this component's flows on its database."""
        return self.database.run(flow)

    def close(self) -> None:
        self.database.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncComponent(Component[AsyncDatabase]):
    """The async twin of :class:`SyncComponent`."""

    @classmethod
    async def _open(
        cls: type[A],
        url: str | Sequence[str],
        make: Callable[[AsyncDatabase], A],
        create_schema: bool,
        options: ConnectOptions,
    ) -> A:
        component = make(await aopen_database(cls._checked(url), **options))
        if create_schema:
            try:
                await component.create_schema()
            except BaseException:
                await component.close()
                raise
        return component

    async def create_schema(self, auto_migrate: bool | None = None) -> None:
        """Create or migrate the schema, as :meth:`SyncComponent.create_schema` does."""
        auto = self.database.embedded if auto_migrate is None else auto_migrate
        await self.database.run(ensure(auto))

    async def run(self, flow: Flow[T]) -> T:
        """Run one of this component's flows on its database."""
        return await self.database.run(flow)

    async def close(self) -> None:
        await self.database.close()

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
