"""Whose failure a transaction step's failed write is (stores/sqlerrors.py): what its own
SQL causes (a constraint, a missing table) is the step's outcome; what the database does
(a full disk, an I/O error, a lock) hands the execution back and is never recorded. On a
real SQLite file whose disk fills up (``PRAGMA max_page_count``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.stores.sqlerrors import is_step_refusal
from raftflow.transports.db.flow import Request, Statement, single
from raftflow.transports.sqlite.connection import SqliteConnection
from sqlalchemy import Column, Integer, LargeBinary, MetaData, String, Table, text

from raftflow import Engine, Transaction, WorkflowFailedError
from tests.support import wait_until

metadata = MetaData()
Table(
    "blobs",
    metadata,
    Column("id", String, primary_key=True),
    Column("data", LargeBinary),
    Column("size", Integer, nullable=False),
)
#: Big enough to need many new pages: the write that a full disk refuses.
BLOB = 200_000


def _run(engine: Engine, sql: str) -> Any:
    response = engine.store.database.run(single(Request((Statement("test", sql),))))
    return response.raise_for_errors()[0]


def _limit_pages(engine: Engine, spare: int) -> None:
    """The disk fills ``spare`` pages from now: room for raftflow's own small writes,
    not for a blob."""
    pages = int(_run(engine, "PRAGMA page_count").rows[0][0])
    _run(engine, f"PRAGMA max_page_count = {pages + spare}")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'full.db'}")
    engine.create_tables(metadata)
    yield engine
    engine.close()


def test_a_full_disk_in_a_transaction_reports_its_own_error(tmp_path: Path) -> None:
    """SQLite rolls the transaction back itself on SQLITE_FULL: the connection's ROLLBACK
    then raised "cannot rollback - no transaction is active", hiding the real error."""
    connection = SqliteConnection(str(tmp_path / "conn.db"))
    try:
        connection.send(Request((Statement("t", "CREATE TABLE t (b BLOB)"),)))
        pages = connection.send(Request((Statement("p", "PRAGMA page_count"),)))[0].rows[0][0]
        connection.send(Request((Statement("m", f"PRAGMA max_page_count = {pages + 2}"),)))
        write = Statement("w", "INSERT INTO t VALUES (randomblob(:n))", {"n": BLOB})
        count = Statement("c", "SELECT COUNT(*) FROM t")
        response = connection.send(Request((write, count), transaction=True))
        assert response[0].error == "database or disk is full"
        assert response[1].error == "not executed: database or disk is full"
        # Nothing applied, and the connection takes the next request.
        assert connection.send(Request((count,)))[0].rows == ((0,),)
    finally:
        connection.close()


def test_a_full_disk_hands_the_execution_back_and_is_never_the_steps_outcome(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="raftflow")
    runs: list[str] = []

    @engine.transaction
    def store(tx: Transaction, key: str) -> str:
        runs.append(key)
        tx.execute(
            text("INSERT INTO blobs (id, data, size) VALUES (:id, randomblob(:n), :n)"),
            {"id": key, "n": BLOB},
            expect_rows=1,
        )
        return key

    @engine.workflow
    def keep(key: str) -> str:
        return str(store(key))

    _limit_pages(engine, 32)
    with engine.running_worker(concurrency=1, retry_delay=0.02):
        handle = engine.start(keep, "k1")
        # Handed back, claimed and run again (before: recorded as failed at once).
        wait_until(lambda: len(runs) >= 3 or handle.status().is_final, timeout=30)
        assert not handle.status().is_final
        assert [s for s in handle.steps() if s.name == "store"] == []  # nothing recorded
        _run(engine, "PRAGMA max_page_count = 1000000")  # room again
        assert handle.result(timeout=30) == "k1"
    (step,) = handle.steps()
    assert (step.status, step.attempts, step.history) == ("succeeded", 1, ())
    assert int(_run(engine, "SELECT COUNT(*) FROM blobs").rows[0][0]) == 1
    handed_back = [r.getMessage() for r in caplog.records if "handing it back" in r.getMessage()]
    assert handed_back and all("database or disk is full" in m for m in handed_back)
    assert not any("cannot rollback" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("INSERT INTO blobs (id, size) VALUES ('taken', 1)", "UNIQUE constraint failed"),
        ("INSERT INTO blobs (id, size) VALUES ('new', NULL)", "NOT NULL constraint failed"),
        ("INSERT INTO no_such (id) VALUES ('x')", "no such table: no_such"),
    ],
    ids=["unique", "not-null", "no-such-table"],
)
def test_what_the_steps_own_sql_causes_is_its_outcome(
    engine: Engine, sql: str, message: str
) -> None:
    _run(engine, "INSERT INTO blobs (id, size) VALUES ('taken', 0)")
    runs: list[int] = []

    @engine.transaction
    def write(tx: Transaction) -> None:
        runs.append(1)
        tx.execute(text(sql))

    @engine.workflow
    def flow() -> None:
        write()

    with engine.running_worker(concurrency=1, retry_delay=0.02):
        handle = engine.start(flow)
        with pytest.raises(WorkflowFailedError, match="TransactionAbortedError"):
            handle.result(timeout=30)
    assert runs == [1]  # once: a refusal is an outcome, not a hand-back
    (step,) = handle.steps()
    assert step.status == "failed" and step.error is not None
    assert step.error.type == "TransactionAbortedError"
    assert message in step.error.message


@pytest.mark.parametrize(
    ("message", "refusal"),
    [
        ("UNIQUE constraint failed: accounts.id", True),
        ("CHECK constraint failed: balance >= 0", True),
        ("NOT NULL constraint failed: accounts.balance", True),
        ("FOREIGN KEY constraint failed", True),
        ("no such table: acounts", True),
        ("no such column: balanse", True),
        ('near "UPDAT": syntax error', True),
        ("table accounts has no column named x", True),
        ("cannot store TEXT value in INTEGER column t.a", True),
        ("database or disk is full", False),
        ("disk I/O error", False),
        ("database is locked", False),
        ("database table is locked", False),
        ("attempt to write a readonly database", False),
        ("database disk image is malformed", False),
        ("not leader", False),
        ("cannot rollback - no transaction is active", False),
        ("something nobody has seen before", False),
        ("", False),
    ],
)
def test_errors_are_classified_in_one_place(message: str, refusal: bool) -> None:
    assert is_step_refusal(message) is refusal
