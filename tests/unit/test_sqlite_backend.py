"""The embedded backend speaks rqlite's request semantics, so the shared flows need no
SQLite special case: transactions stop at the first error and roll back, statement-by-
statement requests keep going. And the queue behaves as on rqlite."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from raftflow.transports import SqlTransport
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.sqlite.connection import MEMORY, SqliteConnection, path_from_url

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
