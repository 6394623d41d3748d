"""Connections to a local SQLite file that behave like rqlite's HTTP API.

A transactional request is one ``BEGIN IMMEDIATE`` transaction that stops at the first
error and rolls back; a non-transactional request runs each statement in its own
transaction and keeps going after a failure -- exactly rqlite's semantics, so the flows in
:mod:`raftflow.transports.queue` and :mod:`raftflow.stores.flows` need no SQLite special case.
SQLite's write lock serializes writers across threads and processes as Raft does across machines.

Durable by default: WAL mode with ``synchronous=FULL``, so a commit is on disk when it is
acknowledged, power loss included. ``sqlite:///app.db?synchronous=normal`` trades that for
speed: a commit is then safe from a crash of the process, but the last ones before a power
loss or an OS crash may be lost (docs/performance.md, "Embedded SQLite: durable commits",
measures the difference).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import time
import urllib.parse
import uuid
from typing import Any

from raftflow.transports.db.flow import Request, Response, Result

from raftflow.errors import ConfigurationError, DatabaseError

MEMORY = ":memory:"
#: How long :meth:`SqliteConnection.run_at_once` waits for another thread of this
#: process to be done with the connection before it gives up.
AT_ONCE_WAIT = 0.05
#: The longest pause between two tries of a request that found the database locked.
MAX_BUSY_DELAY = 0.05
#: The ``synchronous`` settings a URL may ask for (``?synchronous=normal``), the default
#: first. OFF is not offered: a crash of the machine could then corrupt the file.
SYNCHRONOUS = ("full", "normal")


class SqliteConnection:
    """A sync connection to ``path`` (``":memory:"`` for a private in-memory database).

    One ``sqlite3`` connection guarded by a lock: safe to share between threads. Several
    processes may open the same file (WAL mode, a 30 s busy timeout).
    """

    def __init__(
        self, path: str, *, busy_timeout: float = 30.0, synchronous: str = SYNCHRONOUS[0]
    ) -> None:
        if not isinstance(path, str) or not path:
            raise ConfigurationError("a SQLite path must be a non-empty string")
        self.synchronous = _check_synchronous(synchronous)
        self.path = path
        if path == MEMORY:
            self._identity = f"sqlite:memory:{uuid.uuid4().hex}"
        else:
            self.path = os.path.abspath(path)
            self._identity = f"sqlite:{self.path}"
        try:
            # No busy timeout in SQLite: a request that finds the database locked by
            # another connection waits in _run (run_at_once must not wait at all).
            self._db = sqlite3.connect(
                self.path, timeout=0, isolation_level=None, check_same_thread=False
            )
            if path != MEMORY:
                self._use_wal(busy_timeout)
        except sqlite3.Error as exc:
            raise DatabaseError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self._busy_timeout = busy_timeout
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
                self._db.execute(f"PRAGMA synchronous={self.synchronous.upper()}")  # checked
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
        return self.send_rest(request, ())

    def run_at_once(self, request: Request) -> tuple[Result, ...]:
        """The results of ``request``'s statements that could run in the calling thread
        without waiting, from the first: all of them, none, or (of a non-transactional
        request) those before one that found the database locked by another connection.
        Of the statements without a result nothing was applied; :meth:`send_rest` runs
        them.

        Used by the async twin to run requests on the event loop itself. A worker thread
        per request cost the step path a GIL hand-off at every statement: the thread
        waits for the busy loop to let go (up to the 5 ms switch interval) while holding
        this connection, and the worker's next commits wait behind it."""
        # Another thread of this process using the connection is brief, and this wait
        # releases the GIL, so that thread goes on at once. Bounded all the same.
        if not self._lock.acquire(timeout=AT_ONCE_WAIT):
            return ()
        try:
            results = self._run(request, wait=False)
            self.round_trips += bool(results)
            return results
        finally:
            self._lock.release()

    def send_rest(self, request: Request, done: tuple[Result, ...]) -> Response:
        """``request`` finished after :meth:`run_at_once` ran its first ``done``."""
        with self._lock:
            self.round_trips += not done
            rest = Request(request.statements[len(done) :], request.transaction, request.level)
            return Response(request, done + self._run(rest, wait=True))

    def _run(self, request: Request, *, wait: bool) -> tuple[Result, ...]:
        """Run ``request``; while another connection holds the database, retry up to the
        busy timeout (``wait``) or stop before the statement that found it locked."""
        delay, deadline = 0.001, time.monotonic() + self._busy_timeout
        if request.transaction and len(request.statements) > 1:
            while True:
                try:
                    results = self._run_transaction(request)
                    if not any(_is_busy(r.error) for r in results):
                        return results
                    locked: str | sqlite3.OperationalError = "rolled back"
                except sqlite3.OperationalError as exc:  # BEGIN IMMEDIATE found it locked
                    if not _is_busy(str(exc)):
                        raise
                    locked = exc
                if not wait:
                    return ()
                if time.monotonic() >= deadline:
                    if isinstance(locked, sqlite3.OperationalError):
                        raise locked
                    return results
                time.sleep(delay)
                delay = min(delay * 2, MAX_BUSY_DELAY)
        done: list[Result] = []
        for statement in request.statements:
            while True:
                result = self._run_one(statement.sql, statement.params)
                if not _is_busy(result.error):
                    break
                if not wait:
                    return tuple(done)  # locked before it wrote anything
                if time.monotonic() >= deadline:
                    break
                time.sleep(delay)
                delay = min(delay * 2, MAX_BUSY_DELAY)
            done.append(result)
        return tuple(done)

    def _run_transaction(self, request: Request) -> tuple[Result, ...]:
        results: list[Result] = []
        self._db.execute("BEGIN IMMEDIATE")
        for statement in request.statements:
            result = self._run_one(statement.sql, statement.params)
            results.append(result)
            if result.error is not None:
                # SQLite may have rolled the transaction back itself (SQLITE_FULL, an I/O
                # error...): a ROLLBACK then fails and would hide the statement's error.
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                missing = len(request.statements) - len(results)
                results.extend(
                    Result(error=f"not executed: {result.error}") for _ in range(missing)
                )
                return tuple(results)
        try:
            self._db.execute("COMMIT")
        except sqlite3.OperationalError:
            # Busy (only outside WAL mode: readers hold the file): the transaction is
            # still open; nothing of it applied. (A failed fsync ends it already.)
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        return tuple(results)

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
    """The async twin: the same connection; a request runs on the event loop when it need
    not wait (:meth:`SqliteConnection.run_at_once`), the rest of it in a worker thread."""

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
        # On the loop as far as it need not wait (run_at_once says why), then in a thread.
        done = self.sync.run_at_once(request)
        if len(done) == len(request.statements):
            return Response(request, done)
        return await asyncio.to_thread(self.sync.send_rest, request, done)

    async def close(self) -> None:
        if self._owns:
            await asyncio.to_thread(self.sync.close)

    def __repr__(self) -> str:
        return f"<AsyncSqliteConnection {self.sync.path}>"


def _is_busy(error: str | None) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED: another connection holds what the statement needs."""
    return error is not None and ("database is locked" in error or "table is locked" in error)


def connect_url(url: str) -> SqliteConnection:
    """A :class:`SqliteConnection` to a ``sqlite:`` URL (:func:`path_from_url`), with the
    options of its query: ``synchronous=full`` (the default) or ``normal``."""
    path = path_from_url(url)
    return SqliteConnection(path, synchronous=_synchronous_of(url))


def _synchronous_of(url: str) -> str:
    query = url.partition("?")[2]
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ConfigurationError(f"a sqlite URL's query must be name=value: {url!r}") from None
    options: dict[str, str] = {}
    for name, value in pairs:
        if name != "synchronous":
            raise ConfigurationError(
                f"unknown option {name!r} in a sqlite URL: the only one is "
                f"synchronous={'|'.join(SYNCHRONOUS)}"
            )
        if name in options:
            raise ConfigurationError(f"option {name!r} given twice in a sqlite URL")
        options[name] = _check_synchronous(value)
    return options.get("synchronous", SYNCHRONOUS[0])


def _check_synchronous(value: object) -> str:
    text = value.lower() if isinstance(value, str) else value
    if text not in SYNCHRONOUS:
        raise ConfigurationError(
            f"synchronous must be {' or '.join(SYNCHRONOUS)} (full: every acknowledged "
            f"commit survives a power loss), not {value!r}"
        )
    return str(text)


def path_from_url(url: str) -> str:
    """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://`` or
    ``sqlite:///:memory:`` (SQLAlchemy's spelling) to a path for :class:`SqliteConnection`;
    a query (``?synchronous=normal``) is left to :func:`connect_url`."""
    if not isinstance(url, str) or not url.startswith("sqlite:"):
        raise ConfigurationError(f"not a sqlite URL: {url!r}")
    rest = url[len("sqlite:") :].partition("?")[0]
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
