"""Transaction steps: a step's own SQL commits with its checkpoint, in one request.

``@engine.transaction`` registers a step whose first parameter is a :class:`Transaction`
(an :class:`AsyncTransaction` for an ``async def``). Its statements are SQLAlchemy Core
constructs or ``sqlalchemy.text()`` with bound parameters, compiled for SQLite with
named parameters (:mod:`raftflow.engine.workflow.sqlcompile`):

- reads (:meth:`Transaction.query`, ``first``, ``scalar``) run at once, at ``strong`` level,
  on the worker's connection: they see the committed state, never the step's own writes
  (a read after a write raises :class:`TransactionError`);
- writes (:meth:`Transaction.execute`) are only buffered. They go with the step's commit
  (:class:`~raftflow.stores.commit.Commit` ``writes``) in one transactional request --
  fenced by the lease like every commit, one Raft entry on rqlite -- and apply together
  with the checkpoint, or not at all (``expect_rows``: see
  :mod:`raftflow.stores.commit_flow`).

What a transaction step may not run is refused before anything is sent
(:class:`RefusedStatementError`): anything but SQLAlchemy statements, DDL, transaction
control, several statements in one, ``RETURNING``, raftflow's own tables (their names come
from the migrations) and ``sqlite_`` names, parameters that are not JSON scalars once
SQLAlchemy's SQLite type conversion has run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from raftflow.stores.commit import Write
from raftflow.stores.sqlerrors import is_step_refusal
from raftflow.transports.db.flow import Flow, Request, Result, Statement

from raftflow.errors import DatabaseError, RefusedStatementError, TransactionError

if TYPE_CHECKING:
    from raftflow.engine.workflow.activation import Activation

#: Buffered writes one attempt of a transaction step may hold.
MAX_WRITES = 1000


def compile_statement(
    statement: Any, params: Mapping[str, Any] | None = None, *, read: bool
) -> Statement:
    """``statement`` (SQLAlchemy Core or ``text()``) as one parameterized SQLite statement;
    :class:`RefusedStatementError` for what a transaction step may not run."""
    from raftflow.engine.workflow import sqlcompile  # SQLAlchemy on first use, not on import

    return sqlcompile.compile_statement(statement, params, read=read)


def create_tables_request(metadata: Any) -> Request:
    """``CREATE TABLE / INDEX IF NOT EXISTS`` of every table of ``metadata``, one request."""
    from raftflow.engine.workflow import sqlcompile

    return sqlcompile.create_tables_request(metadata)


def _check_expect(expect_rows: Any) -> int | None:
    if expect_rows is None:
        return None
    if isinstance(expect_rows, bool) or not isinstance(expect_rows, int) or expect_rows < 0:
        raise RefusedStatementError("expect_rows must be None or an int >= 0")
    return expect_rows


def _rows(result: Result) -> list[dict[str, Any]]:
    """A read's rows; its failure is the step's when its own SQL caused it, otherwise the
    database's (:mod:`~raftflow.stores.sqlerrors`)."""
    if result.error is not None:
        message = f"a read of the transaction failed: {result.error}"
        if is_step_refusal(result.error):
            raise TransactionError(message)
        raise DatabaseError(message)
    return result.dicts()


def _read_flow(statement: Statement) -> Flow[Result]:
    response = yield Request((statement,), level="strong")
    return response[0]


class _Transaction:
    """What both twins share: the buffer, the checks, the lifecycle of one attempt."""

    def __init__(self, run: Activation) -> None:
        self._run = run
        self._writes: list[Write] = []
        self._closed = False
        #: An infrastructure failure of a read (never the step's outcome: handed back).
        self.failure: BaseException | None = None

    def execute(
        self,
        statement: Any,
        params: Mapping[str, Any] | None = None,
        *,
        expect_rows: int | None = None,
    ) -> None:
        """Buffer a write (INSERT, UPDATE, DELETE): it is sent with the step's checkpoint
        and applies with it, or not at all. ``expect_rows``: the attempt aborts (nothing
        written) when this statement changes another number of rows. Not awaited, even in
        an :class:`AsyncTransaction`."""
        self._check_open()
        expected = _check_expect(expect_rows)
        if len(self._writes) >= MAX_WRITES:
            raise RefusedStatementError(f"a transaction step buffers {MAX_WRITES} writes at most")
        self._writes.append(Write(compile_statement(statement, params, read=False), expected))

    @property
    def writes(self) -> tuple[Write, ...]:
        return tuple(self._writes)

    def close(self) -> tuple[Write, ...]:
        """End the attempt: what it buffered; the transaction takes nothing more."""
        self._closed = True
        return self.writes

    def _check_open(self) -> None:
        if self._closed:
            raise TransactionError("this transaction's attempt is over: it takes no statement")

    def _read_statement(self, statement: Any, params: Mapping[str, Any] | None) -> Statement:
        self._check_open()
        if self._writes:
            raise TransactionError(
                "a read after a write in the same transaction step: reads see the committed "
                "state only, not the step's buffered writes -- read first, then write"
            )
        return compile_statement(statement, params, read=True)


class Transaction(_Transaction):
    """The transaction of a sync transaction step: reads at once, writes buffered."""

    def query(
        self, statement: Any, params: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The rows of a SELECT as dicts, read now at ``strong`` level (committed state)."""
        read = self._read_statement(statement, params)
        try:
            return _rows(self._run.wait(self._run.host.run_flow(_read_flow(read))))
        except TransactionError:
            raise
        except Exception as exc:  # the database's failure, not the step's
            self.failure = exc
            raise

    def first(
        self, statement: Any, params: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """The first row of a SELECT, or None."""
        rows = self.query(statement, params)
        return rows[0] if rows else None

    def scalar(self, statement: Any, params: Mapping[str, Any] | None = None) -> Any:
        """The first column of the first row of a SELECT, or None."""
        row = self.first(statement, params)
        return None if row is None else next(iter(row.values()), None)


class AsyncTransaction(_Transaction):
    """The transaction of an ``async def`` transaction step: reads are awaited."""

    async def query(
        self, statement: Any, params: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The rows of a SELECT as dicts, read now at ``strong`` level (committed state)."""
        read = self._read_statement(statement, params)
        try:
            return _rows(await self._run.host.run_flow(_read_flow(read)))
        except TransactionError:
            raise
        except Exception as exc:  # the database's failure, not the step's
            self.failure = exc
            raise

    async def first(
        self, statement: Any, params: Mapping[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """The first row of a SELECT, or None."""
        rows = await self.query(statement, params)
        return rows[0] if rows else None

    async def scalar(self, statement: Any, params: Mapping[str, Any] | None = None) -> Any:
        """The first column of the first row of a SELECT, or None."""
        row = await self.first(statement, params)
        return None if row is None else next(iter(row.values()), None)
