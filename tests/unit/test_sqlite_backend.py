"""The embedded backend speaks rqlite's request semantics, so the shared flows need no
SQLite special case: transactions stop at the first error and roll back, statement-by-
statement requests keep going. And the queue behaves as on rqlite."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from raftflow.transports import SqlTransport
from raftflow.transports.db.database import aopen_database
from raftflow.transports.db.flow import Request, Statement, single
from raftflow.transports.sqlite.connection import MEMORY, SqliteConnection, path_from_url

from raftflow import Engine
from raftflow.errors import ConfigurationError, LeaseLostError


@pytest.fixture
def connection() -> Iterator[SqliteConnection]:
    connection = SqliteConnection(MEMORY)
    connection.send(Request((Statement("t.create", "CREATE TABLE t (a INTEGER UNIQUE)"),)))
    yield connection
    connection.close()


def _count(connection: SqliteConnection) -> int:
    response = connection.send(Request((Statement("t.count", "SELECT COUNT(*) AS n FROM t"),)))
    return int(response[0].dicts()[0]["n"])


def test_transaction_rolls_back_at_the_first_error(connection: SqliteConnection) -> None:
    insert = "INSERT INTO t VALUES (?)"
    response = connection.send(
        Request(
            (
                Statement("a", insert, (1,)),
                Statement("b", insert, (1,)),
                Statement("c", insert, (2,)),
            ),
            transaction=True,
        )
    )
    assert response.rolled_back
    assert "UNIQUE" in (response[1].error or "") and (response[2].error or "").startswith(
        "not executed"
    )
    assert _count(connection) == 0


def test_statement_by_statement_keeps_going(connection: SqliteConnection) -> None:
    insert = "INSERT INTO t VALUES (?)"
    response = connection.send(
        Request(
            (
                Statement("a", insert, (1,)),
                Statement("b", insert, (1,)),
                Statement("c", insert, (2,)),
            ),
            transaction=False,
        )
    )
    assert [r.error is None for r in response.results] == [True, False, True]
    assert _count(connection) == 2


@pytest.mark.parametrize(
    "url, path",
    [
        ("sqlite://", MEMORY),
        ("sqlite:///:memory:", MEMORY),
        ("sqlite:///a.db", "a.db"),
        ("sqlite:////tmp/b.db", "/tmp/b.db"),
    ],
)
def test_sqlite_urls(url: str, path: str) -> None:
    assert path_from_url(url) == path


@pytest.mark.parametrize("url", ["sqlite:relative.db", "postgres://x", "sqlite:///"])
def test_bad_sqlite_urls(url: str) -> None:
    with pytest.raises(ConfigurationError):
        path_from_url(url)


def _synchronous(engine: Engine) -> int:
    statement = Statement("pragma", "PRAGMA synchronous")
    return int(engine.store.database.run(single(Request((statement,))))[0].rows[0][0])


def test_a_file_is_durable_by_default_and_normal_is_an_explicit_opt_out(tmp_path: Path) -> None:
    """FULL (2): a commit is fsynced before it is acknowledged; NORMAL (1) only when asked."""
    durable = Engine.from_url(f"sqlite:///{tmp_path / 'durable.db'}")
    fast = Engine.from_url(f"sqlite:///{tmp_path / 'fast.db'}?synchronous=NORMAL")
    spelled = Engine.from_url(f"sqlite:///{tmp_path / 'full.db'}?synchronous=full")
    try:
        assert _synchronous(durable) == 2
        assert _synchronous(fast) == 1
        assert _synchronous(spelled) == 2
        assert durable.store.database.run(durable.store.database.clock.now()) > 0  # usable
    finally:
        for engine in (durable, fast, spelled):
            engine.close()
    async_db = asyncio.run(_async_synchronous(f"sqlite:///{tmp_path / 'async.db'}"))
    assert async_db == 2


async def _async_synchronous(url: str) -> int:
    database = await aopen_database(url)
    try:
        response = await database.run(single(Request((Statement("p", "PRAGMA synchronous"),))))
        return int(response[0].rows[0][0])
    finally:
        await database.close()


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("synchronous=off", "synchronous must be full or normal"),
        ("synchronous=", "synchronous must be full or normal"),
        ("synchronous=normal&synchronous=full", "given twice"),
        ("journal_mode=delete", "unknown option 'journal_mode'"),
        ("normal", "name=value"),
    ],
)
def test_a_bad_synchronous_option_is_refused_clearly(
    tmp_path: Path, query: str, match: str
) -> None:
    path = tmp_path / "refused.db"
    with pytest.raises(ConfigurationError, match=match):
        Engine.from_url(f"sqlite:///{path}?{query}")
    assert not path.exists()  # refused before anything was opened
    with pytest.raises(ConfigurationError, match="synchronous must be"):
        SqliteConnection(str(path), synchronous="off")


def test_queue_semantics_on_a_shared_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    first, second = SqlTransport.from_url(url), SqlTransport.from_url(url)
    try:
        for i in range(3):
            first.publish("g", i)
        lease = first.claim("w1", visibility=0.2)
        assert lease is not None and lease.event == 0
        assert second.claim("w2", visibility=5) is None  # one lease per group
        time.sleep(0.3)
        taken = second.claim("w2", visibility=5)  # the first lease lapsed
        assert taken is not None and taken.seq == lease.seq and taken.attempts == 2
        with pytest.raises(LeaseLostError):
            first.ack(lease)
        second.nack(taken, delay=0.2)  # parked: the group waits
        assert first.claim("w1", visibility=5) is None
        time.sleep(0.3)
        again = first.claim("w1", visibility=5)
        assert again is not None and again.event == 0
        first.ack(again)
        assert [first.claim("w1", 5).event for _ in range(1)] == [1]
    finally:
        first.close()
        second.close()
