"""The I/O-free database layer shared by every backend and both twins.

A backend operation is a *flow*: a generator that yields :class:`Request` objects and
receives a :class:`Response` for each. The flow holds all the logic (which statements,
how to read the results, what a retry means); a *connection* only carries requests to a
database. :func:`run_flow` and :func:`arun_flow` run a flow over a sync or an async
connection, so every operation is written once for rqlite and SQLite, sync and async (the
shape of httpx's ``Auth.auth_flow``).

A request mirrors rqlite's model, which the SQLite connection reproduces: a list of
statements applied as one unit (one Raft entry), either as one transaction (all or
nothing, stops at the first error) or statement by statement (each statement atomic on
its own, a failing one does not stop the others).
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol, TypeVar

from raftflow.errors import StatementError

ReadLevel = Literal["none", "weak", "strong"]
Params = Sequence[Any] | Mapping[str, Any]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Statement:
    """One SQL statement with its parameters; ``name`` is its key in the SQL catalogue."""

    name: str
    sql: str
    params: Params = ()

    @property
    def is_read(self) -> bool:
        return is_read(self.sql)


@dataclass(frozen=True, slots=True)
class Request:
    """Statements sent together: one HTTP round trip and at most one Raft entry on rqlite."""

    statements: tuple[Statement, ...]
    transaction: bool = True
    level: ReadLevel = "weak"

    @property
    def is_read_only(self) -> bool:
        return all(s.is_read for s in self.statements)

    @property
    def has_reads(self) -> bool:
        return any(s.is_read for s in self.statements)

    def __add__(self, other: Request) -> Request:
        return Request(
            self.statements + other.statements,
            transaction=self.transaction and other.transaction,
            level=self.level,
        )


@dataclass(frozen=True, slots=True)
class Result:
    """The outcome of one statement."""

    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    rows_affected: int = 0
    last_insert_id: int | None = None
    error: str | None = None

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row)) for row in self.rows]

    def first(self) -> dict[str, Any] | None:
        return dict(zip(self.columns, self.rows[0])) if self.rows else None


@dataclass(frozen=True, slots=True)
class Response:
    """Results of a request, one per statement, in order.

    ``ambiguous`` is true when an earlier attempt of the same request failed in a way that
    may have applied it (rqlite: a connection lost after sending, "leadership lost while
    committing"); flows use it to read a zero-row outcome as "already done".
    """

    request: Request
    results: tuple[Result, ...]
    ambiguous: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, index: int) -> Result:
        return self.results[index]

    @property
    def rolled_back(self) -> bool:
        """A transactional request with a failed statement applied nothing."""
        return self.request.transaction and any(r.error is not None for r in self.results)

    def raise_for_errors(self) -> Response:
        """Raise :class:`StatementError` for the first statement that failed."""
        for statement, result in zip(self.request.statements, self.results):
            if result.error is not None:
                raise StatementError(statement.name, result.error)
        return self

    def result_of(self, name: str) -> Result:
        """The result of the first statement with this catalogue name."""
        for statement, result in zip(self.request.statements, self.results):
            if statement.name == name:
                return result
        raise KeyError(name)


Flow = Generator[Request, Response, T]


@lru_cache(maxsize=1024)
def is_read(sql: str) -> bool:
    """Whether a statement only reads (a catalogue's statements are a few texts, sent often)."""
    return sql.lstrip()[:7].upper().startswith(("SELECT", "EXPLAIN", "PRAGMA"))


class Connection(Protocol):
    """Carries requests to one database (an rqlite cluster or a SQLite file)."""

    @property
    def identity(self) -> str:
        """A string that is equal for two connections to the same database."""
        ...

    def send(self, request: Request) -> Response: ...

    def to_async(self) -> AsyncConnection:
        """An async connection to the same database (for a worker's event loop)."""
        ...

    def close(self) -> None: ...


class AsyncConnection(Protocol):
    """The async twin of :class:`Connection`."""

    @property
    def identity(self) -> str: ...

    async def send(self, request: Request) -> Response: ...

    async def close(self) -> None: ...


def run_flow(connection: Connection, flow: Flow[T]) -> T:
    """Run ``flow`` to completion over a sync connection."""
    try:
        request = next(flow)
        while True:
            request = flow.send(connection.send(request))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def arun_flow(connection: AsyncConnection, flow: Flow[T]) -> T:
    """Run ``flow`` to completion over an async connection."""
    try:
        request = next(flow)
        while True:
            request = flow.send(await connection.send(request))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def single(request: Request) -> Flow[Response]:
    """A flow of one request whose value is the response, errors raised."""
    response = yield request
    return response.raise_for_errors()
