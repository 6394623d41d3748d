"""One database, chosen by its URL: an rqlite cluster, a SQLite file or SQLite in memory.

A :class:`Database` is a connection plus the clock that lease deadlines are measured by;
that pair is all a dialect supplies. Everything above it -- the queue
(:mod:`raftflow.transports.queue`), the store (:mod:`raftflow.stores.flows`, its commit
:mod:`raftflow.stores.commit_flow`) -- is I/O-free flows that a database runs::

    http(s)://user:pass@host:4001,host:4003   rqlite   RqliteConnection + ClusterClock
    sqlite:///path.db   sqlite:///:memory:   SqliteConnection + LocalClock
    sqlite:///path.db?synchronous=normal     (faster, not durable on power loss)

The sync :class:`Database` and the :class:`AsyncDatabase` twin differ only by ``await``;
:meth:`Database.to_async` gives the twin on the same database (sharing the clock, so
both agree on time; for SQLite sharing the connection too, which the twin never closes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypedDict, TypeVar

from raftflow.transports.db.clock import Clock, ClusterClock, LocalClock
from raftflow.transports.db.flow import AsyncConnection, Connection, Flow, arun_flow, run_flow
from raftflow.transports.queue import QUERIES
from typing_extensions import Unpack

from raftflow.errors import ConfigurationError

T = TypeVar("T")

RQLITE_SCHEMES = ("http", "https", "rqlite", "rqlites")


C = TypeVar("C", Connection, AsyncConnection)


class ConnectOptions(TypedDict, total=False):
    """How to reach a database: the keyword options of every ``from_url``.

    They apply to rqlite URLs (a ``sqlite:`` URL takes none but ``clock``): ``verify`` is
    ``True``, ``False`` or the path of a CA bundle; ``username`` and ``password`` the
    credentials when the URL has none (never shown); ``timeout`` bounds one HTTP attempt,
    ``retry_timeout`` all the attempts of one request across nodes and leader changes,
    ``connect_timeout`` the wait for a leader with a quorum at connect; ``http`` picks
    the HTTP client (``"raftflow"``, the default: raftflow's own HTTP/1.1 on keep-alive
    sockets; ``"httpx"``, the spec's; ``"requests"`` for the sync connection, whose async
    twin then uses raftflow's); ``clock`` replaces the one lease deadlines use (tests skew it).
    """

    verify: bool | str
    username: str
    password: str
    timeout: float
    retry_timeout: float
    connect_timeout: float
    http: Literal["raftflow", "httpx", "requests"]
    clock: Clock


@dataclass(eq=False)
class FirstUse:
    """A check run before a database's first request, until it passes once: a cluster of
    a sharded deployment that was out of reach when the deployment was opened is checked
    (its identity, its schema) as soon as it answers, before anything else is sent to it.
    Shared by a database and its async twin."""

    check: Callable[[], Flow[None]]
    passed: bool = False


@dataclass(eq=False)
class _Database(Generic[C]):
    connection: C
    clock: Clock
    first_use: FirstUse | None = None

    @property
    def identity(self) -> str:
        """Equal for two databases objects that reach the same database."""
        return self.connection.identity

    @property
    def embedded(self) -> bool:
        """A local SQLite database (its schema is migrated on connect by default)."""
        return self.identity.startswith("sqlite:")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.connection!r}>"


class Database(_Database[Connection]):
    """A sync connection to one database and the clock its leases use."""

    def run(self, flow: Flow[T]) -> T:
        """Run an I/O-free flow over this connection."""
        first = self.first_use
        if first is not None and not first.passed:
            run_flow(self.connection, first.check())
            first.passed = True
        return run_flow(self.connection, flow)

    def to_async(self) -> AsyncDatabase:
        """The async twin on the same database and clock (not yet used: nothing is sent)."""
        return AsyncDatabase(self.connection.to_async(), self.clock, self.first_use)

    def close(self) -> None:
        self.connection.close()


class AsyncDatabase(_Database[AsyncConnection]):
    """The async twin of :class:`Database`."""

    async def run(self, flow: Flow[T]) -> T:
        """Run an I/O-free flow over this connection."""
        first = self.first_use
        if first is not None and not first.passed:
            await arun_flow(self.connection, first.check())
            first.passed = True
        return await arun_flow(self.connection, flow)

    async def close(self) -> None:
        await self.connection.close()


def scheme_of(url: str | Sequence[str]) -> str:
    """``rqlite`` or ``sqlite``; :class:`ConfigurationError` for anything else."""
    first = url if isinstance(url, str) else (url[0] if url else "")
    if not isinstance(first, str):
        raise ConfigurationError(f"a database URL must be a str, not {type(first).__name__}")
    scheme = first.split(":", 1)[0].lower()
    if scheme in RQLITE_SCHEMES:
        return "rqlite"
    if scheme == "sqlite" and isinstance(url, str):
        return "sqlite"
    raise ConfigurationError(
        f"unsupported database URL {scheme + ':...'!r}: use http(s)://host:port for rqlite "
        "or sqlite:///path.db for a local SQLite file"
    )


def check_connect_options(options: Mapping[str, object]) -> None:
    """Refuse, at once, an option that is not one of :class:`ConnectOptions`."""
    unknown = sorted(set(options) - set(ConnectOptions.__annotations__))
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) {', '.join(unknown)}; the connection options are "
            f"{', '.join(sorted(ConnectOptions.__annotations__))}"
        )


def open_database(url: str | Sequence[str], **options: Unpack[ConnectOptions]) -> Database:
    """Connect to ``url`` (see the module docstring) with :class:`ConnectOptions`.

    For rqlite it waits up to ``connect_timeout`` for a leader with a quorum.
    """
    check_connect_options(options)
    clock = options.pop("clock", None)
    if scheme_of(url) == "rqlite":
        from raftflow.transports.rqlite.client import connect

        return Database(connect(url, **options), clock or ClusterClock(QUERIES("clock")))
    from raftflow.transports.sqlite.connection import connect_url

    _no_options("sqlite", options)
    assert isinstance(url, str)
    return Database(connect_url(url), clock or LocalClock())


def open_unreached(
    url: str | Sequence[str], first_use: FirstUse, **options: Unpack[ConnectOptions]
) -> Database:
    """A database for an rqlite ``url`` that did not answer: nothing is sent until its
    first request, which ``first_use`` precedes (:func:`open_database` waits for it)."""
    check_connect_options(options)
    from raftflow.transports.rqlite.client import connect

    clock = options.pop("clock", None) or ClusterClock(QUERIES("clock"))
    return Database(connect(url, wait=False, **options), clock, first_use)


async def aopen_database(
    url: str | Sequence[str], **options: Unpack[ConnectOptions]
) -> AsyncDatabase:
    """The async twin of :func:`open_database`."""
    check_connect_options(options)
    clock = options.pop("clock", None)
    if scheme_of(url) == "rqlite":
        from raftflow.transports.rqlite.client import aconnect

        cluster = await aconnect(url, **options)
        return AsyncDatabase(cluster, clock or ClusterClock(QUERIES("clock")))
    from raftflow.transports.sqlite.connection import AsyncSqliteConnection, connect_url

    _no_options("sqlite", options)
    assert isinstance(url, str)
    connection = AsyncSqliteConnection(connect_url(url))
    return AsyncDatabase(connection, clock or LocalClock())


def _no_options(kind: str, options: ConnectOptions) -> None:
    if options:
        raise ConfigurationError(f"{kind} URLs take no connection options, got {sorted(options)}")
