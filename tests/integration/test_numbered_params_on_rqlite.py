"""Named parameters sent numbered (transports/rqlite/numbered.py) mean on real rqlite what
they meant named: a name used twice, text that only looks like a parameter, rqlite's own
parse of a statement (its RANDOM() rewrite, RETURNING), and the fallback to names."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from raftflow.transports.db.database import Database, open_database
from raftflow.transports.db.flow import Flow, Request, Response, Statement
from raftflow.transports.rqlite.local import LocalCluster


@pytest.fixture
def scratch(rqlite_cluster: LocalCluster) -> Iterator[tuple[Database, str]]:
    """The shared cluster, and a table of this test's own."""
    db = open_database(rqlite_cluster.urls)
    table = f"numbered_{uuid.uuid4().hex[:8]}"
    send(db, Statement("create", f"CREATE TABLE {table} (a, b, c)"))
    yield db, table
    send(db, Statement("drop", f"DROP TABLE {table}"))
    db.close()


def send(db: Database, *statements: Statement, level: str = "weak") -> Response:
    def flow() -> Flow[Response]:
        response = yield Request(statements, level=level)  # type: ignore[arg-type]
        return response.raise_for_errors()

    return db.run(flow())


def test_named_parameters_mean_the_same_numbered(scratch: tuple[Database, str]) -> None:
    database, t = scratch
    send(
        database,
        Statement("insert", f"INSERT INTO {t} (a, b, c) VALUES (:x, ':x', :y)", {"x": 1, "y": 2}),
        Statement(
            "twice",  # one name in three places, and a key the statement does not use
            f"INSERT INTO {t} (a, b, c) SELECT :x, :x + 1, 'a -- :y' WHERE :x > 0",
            {"x": 10, "unused": 0},
        ),
        Statement("random", f"INSERT INTO {t} (a, b, c) VALUES (:x, random(), NULL)", {"x": 20}),
    )
    returned = send(
        database,
        Statement(
            "returning", f"UPDATE {t} SET c = :c WHERE a = :a RETURNING a, c", {"a": 1, "c": 3}
        ),
    )
    assert returned[0].dicts() == [{"a": 1, "c": 3}]
    rows = send(
        database,
        Statement("read", f"SELECT a, b, c FROM {t} WHERE a <= :top ORDER BY a", {"top": 10}),
        level="strong",
    )[0].dicts()
    assert rows == [{"a": 1, "b": ":x", "c": 3}, {"a": 10, "b": 11, "c": "a -- :y"}]
    # RANDOM() was evaluated once, by the leader: every node stored the same value.
    (row,) = send(database, Statement("r", f"SELECT b FROM {t} WHERE a = 20"), level="strong")[
        0
    ].dicts()
    assert isinstance(row["b"], int)


def test_a_statement_that_cannot_be_numbered_still_works_named(
    scratch: tuple[Database, str],
) -> None:
    database, t = scratch
    send(database, Statement("mixed", f"INSERT INTO {t} (a, b) VALUES (:a, @b)", {"a": 1, "b": 2}))
    rows = send(database, Statement("read", f"SELECT a, b FROM {t}"), level="strong")[0].dicts()
    assert rows == [{"a": 1, "b": 2}]
