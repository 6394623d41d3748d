"""Connections to a local SQLite file that behave like rqlite's HTTP API.

A transactional request is one ``BEGIN IMMEDIATE`` transaction that stops at the first
error and rolls back; a non-transactional request runs each statement in its own
transaction and keeps going after a failure -- exactly rqlite's semantics, so the flows in
:mod:`raftflow.transports.queue` and :mod:`raftflow.stores.flows` need no SQLite special case.
SQLite's write lock serializes writers across threads and processes as Raft does across machines.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import uuid
from typing import Any

from raftflow.transports.errors import ConfigurationError, DatabaseError
from raftflow.transports.flow import Request, Response, Result

MEMORY = ":memory:"


class SqliteConnection:
    """A sync connection to ``path`` (``":memory:"`` for a private in-memory database).

    One ``sqlite3`` connection guarded by a lock: safe to share between threads. Several
    processes may open the same file (WAL mode, a 30 s busy timeout).
    """

    def __init__(self, path: str, *, busy_timeout: float = 30.0) -> None:
        if not isinstance(path, str) or not path:
            raise ConfigurationError("a SQLite path must be a non-empty string")
        self.path = path
        if path == MEMORY:
            self._identity = f"sqlite:memory:{uuid.uuid4().hex}"
        else:
            self.path = os.path.abspath(path)
            self._identity = f"sqlite:{self.path}"
        try:
            self._db = sqlite3.connect(
                self.path,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
            if path != MEMORY:
                self._use_wal(busy_timeout)
        except sqlite3.Error as exc:
            raise DatabaseError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self.round_trips = 0

    def _use_wal(self, timeout: float) -> None:
        """WAL mode (kept in the file once set), retried while the file is locked: the
        switch needs the database to itself for a moment, and a connection opening it at
        that moment gets "locked" at once, without waiting on the busy timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                return
            except sqlite3.OperationalError as exc:
                text = str(exc).lower()
                if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    @property
    def identity(self) -> str:
        return self._identity

    def send(self, request: Request) -> Response:
        with self._lock:
            self.round_trips += 1
            if request.transaction and len(request.statements) > 1:
                results = self._run_transaction(request)
            else:
                results = [self._run_one(s.sql, s.params) for s in request.statements]
        return Response(request, tuple(results))

    def _run_transaction(self, request: Request) -> list[Result]:
        results: list[Result] = []
        self._db.execute("BEGIN IMMEDIATE")
        for statement in request.statements:
            result = self._run_one(statement.sql, statement.params)
            results.append(result)
            if result.error is not None:
                self._db.execute("ROLLBACK")
                missing = len(request.statements) - len(results)
                results.extend(
                    Result(error=f"not executed: {result.error}") for _ in range(missing)
                )
                return results
        self._db.execute("COMMIT")
        return results

    def _run_one(self, sql: str, params: Any) -> Result:
        try:
            cursor = self._db.execute(sql, params)
            rows = cursor.fetchall()
        except sqlite3.Error as exc:
            return Result(error=str(exc))
        columns = tuple(d[0] for d in cursor.description or ())
        return Result(
            columns=columns,
            rows=tuple(tuple(r) for r in rows),
            rows_affected=max(cursor.rowcount, 0) if not columns else 0,
            last_insert_id=cursor.lastrowid,
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def to_async(self) -> AsyncSqliteConnection:
        """An async view of this connection; closing it leaves this one open."""
        return AsyncSqliteConnection(self, owns=False)

    def __repr__(self) -> str:
        return f"<SqliteConnection {self.path}>"


class AsyncSqliteConnection:
    """The async twin: the same connection, each request run in a worker thread."""

    def __init__(self, sync: SqliteConnection, *, owns: bool = True) -> None:
        self.sync = sync
        self._owns = owns

    @property
    def identity(self) -> str:
        return self.sync.identity

    @property
    def round_trips(self) -> int:
        return self.sync.round_trips

    async def send(self, request: Request) -> Response:
        return await asyncio.to_thread(self.sync.send, request)

    async def close(self) -> None:
        if self._owns:
            await asyncio.to_thread(self.sync.close)

    def __repr__(self) -> str:
        return f"<AsyncSqliteConnection {self.sync.path}>"


def path_from_url(url: str) -> str:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://`` or
    ``sqlite:///:memory:`` (SQLAlchemy's spelling) to a path for :class:`SqliteConnection`."""
    if not isinstance(url, str) or not url.startswith("sqlite:"):
        raise ConfigurationError(f"not a sqlite URL: {url!r}")
    rest = url[len("sqlite:") :]
    if rest in ("", "//", "///:memory:", "//:memory:", ":memory:"):
        return MEMORY
    if not rest.startswith("///"):
        raise ConfigurationError(
            "a sqlite URL is sqlite:///relative/path.db or sqlite:////absolute/path.db, "
            f"not {url!r}"
        )
    path = rest[3:]
    if not path:
        raise ConfigurationError(f"a sqlite URL needs a path: {url!r}")
    return path
