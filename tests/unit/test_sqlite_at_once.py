"""The embedded async connection runs a request on the event loop only when that cannot
wait: another connection to the file holding its write lock sends the request (or the
rest of it) to a thread, which waits for the lock as long as the busy timeout allows,
and nothing is applied twice."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.sqlite.connection import AsyncSqliteConnection, SqliteConnection

INSERT = "INSERT INTO t VALUES (?)"


@pytest.fixture
def path(tmp_path: Path) -> str:
    path = str(tmp_path / "at_once.db")
    setup = SqliteConnection(path)
    setup.send(Request((Statement("t.create", "CREATE TABLE t (a INTEGER UNIQUE)"),)))
    setup.close()
    return path


@pytest.fixture
def holder(path: str) -> Iterator[sqlite3.Connection]:
    """Another connection to the file, as another process would hold it."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    yield other
    other.close()


def _values(connection: SqliteConnection) -> list[int]:
    response = connection.send(Request((Statement("t.all", "SELECT a FROM t ORDER BY a"),)))
    return [row[0] for row in response[0].rows]


def _release_later(holder: sqlite3.Connection, seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, lambda: holder.execute("COMMIT"))
    timer.start()
    return timer


def test_a_transaction_found_locked_is_not_run_at_once(
    path: str, holder: sqlite3.Connection
) -> None:
    connection = SqliteConnection(path, busy_timeout=30.0)
    request = Request((Statement("a", INSERT, (1,)), Statement("b", INSERT, (2,))))
    holder.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    assert connection.run_at_once(request) == ()
    assert time.monotonic() - started < 30.0  # did not wait on the lock (its busy timeout)
    assert connection.round_trips == 0
    holder.execute("COMMIT")
    done = connection.run_at_once(request)
    assert len(done) == 2 and all(r.error is None for r in done)
    assert connection.round_trips == 1
    assert _values(connection) == [1, 2]
    connection.close()


def test_the_rest_of_a_request_waits_in_a_thread_and_nothing_runs_twice(
    path: str, holder: sqlite3.Connection
) -> None:
    """A read goes through a writer's lock (WAL); the write after it does not: the read's
    result is kept, and only the write is sent again, once the lock is free."""
    connection = SqliteConnection(path)
    request = Request(
        (
            Statement("count", "SELECT COUNT(*) FROM t"),
            Statement("a", INSERT, (7,)),
            Statement("b", INSERT, (8,)),
        ),
        transaction=False,
    )
    holder.execute("BEGIN IMMEDIATE")
    done = connection.run_at_once(request)
    assert len(done) == 1 and done[0].rows == ((0,),)
    timer = _release_later(holder, 0.3)
    started = time.monotonic()
    response = connection.send_rest(request, done)
    assert time.monotonic() - started >= 0.25  # waited for the lock, then ran
    timer.join()
    assert response.request is request
    assert [r.error for r in response.results] == [None, None, None]
    assert response[0].rows == ((0,),)
    assert connection.round_trips == 1  # one request, in two parts
    assert _values(connection) == [7, 8]
    connection.close()


def test_the_event_loop_goes_on_while_a_request_waits_for_another_connection(
    path: str, holder: sqlite3.Connection
) -> None:
    connection = AsyncSqliteConnection(SqliteConnection(path))
    request = Request((Statement("a", INSERT, (3,)), Statement("b", INSERT, (4,))))

    async def scenario() -> tuple[int, float]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)  # the ticker starts: its first tick
        holder.execute("BEGIN IMMEDIATE")
        timer = _release_later(holder, 0.4)
        started = time.monotonic()
        response = await connection.send(request)
        waited = time.monotonic() - started
        stop.set()
        await task
        timer.join()
        assert [r.error for r in response.results] == [None, None]
        return ticks, waited

    ticks, waited = asyncio.run(scenario())
    assert waited >= 0.35
    assert ticks >= 2  # a 10 ms sleep of the loop ended during the wait: it was in a thread
    assert _values(connection.sync) == [3, 4]
    asyncio.run(connection.close())


def test_a_request_waits_up_to_the_busy_timeout(path: str, holder: sqlite3.Connection) -> None:
    connection = SqliteConnection(path, busy_timeout=0.3)
    holder.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        connection.send(Request((Statement("a", INSERT, (5,)), Statement("b", INSERT, (6,)))))
    assert 0.25 <= time.monotonic() - started < 10.0  # the busy timeout, not for ever
    lone = connection.send(Request((Statement("a", INSERT, (5,)),), transaction=False))
    assert "locked" in (lone[0].error or "")
    holder.execute("COMMIT")
    assert _values(connection) == []
    connection.close()


def test_requests_from_threads_and_the_loop_share_the_connection(path: str) -> None:
    """Sync senders in threads and the async twin on a loop, at once: every insert is
    applied exactly once."""
    sync = SqliteConnection(path)
    connection = sync.to_async()

    def sender(base: int) -> None:
        for i in range(50):
            sync.send(Request((Statement("a", INSERT, (base + i,)),)))

    async def loop_sender() -> None:
        for i in range(50):
            await connection.send(
                Request((Statement("a", INSERT, (i,)), Statement("b", INSERT, (1000 + i,))))
            )

    threads = [threading.Thread(target=sender, args=(base,)) for base in (2000, 3000)]
    for thread in threads:
        thread.start()
    asyncio.run(loop_sender())
    for thread in threads:
        thread.join()
    values = _values(sync)
    assert len(values) == 200 and len(set(values)) == 200
    sync.close()


def test_a_commit_found_locked_applies_nothing(path: str, holder: sqlite3.Connection) -> None:
    """Outside WAL mode a reader blocks the COMMIT itself (it needs the file alone): the
    transaction is rolled back and sent again once the reader is done, and applies once."""
    connection = SqliteConnection(path)
    connection.send(Request((Statement("mode", "PRAGMA journal_mode=DELETE"),)))
    holder.execute("BEGIN")
    holder.execute("SELECT COUNT(*) FROM t").fetchall()  # a read transaction: SHARED lock
    request = Request((Statement("a", INSERT, (1,)), Statement("b", INSERT, (2,))))
    assert connection.run_at_once(request) == ()
    timer = _release_later(holder, 0.3)
    response = connection.send_rest(request, ())
    timer.join()
    assert [r.error for r in response.results] == [None, None]
    assert _values(connection) == [1, 2]
    connection.close()
