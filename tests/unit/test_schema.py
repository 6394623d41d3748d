"""Schema versions and migrations on SQLite (tests/integration/test_migrations.py runs the
same on a 3-node rqlite cluster, with a leader killed mid-migration and racing migrators).

Besides the real migrations, a made-up series (``series``: the real first migration, then
three more, the last of them broken) checks the mechanism itself: order, stops, all or
nothing, and racing migrators.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from raftflow.transports.db.database import Database, open_database
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.db.schema import (
    LATEST,
    MIGRATIONS,
    Migration,
    ensure,
    load_migrations,
    migrate,
    read_state,
)

from raftflow import Engine, SchemaOutdatedError, SchemaTooNewError, Status
from raftflow.errors import StatementError
from tests.support import execute, recorded, rows

ROOT = Path(__file__).resolve().parents[2]


def write_series(folder: Path) -> tuple[Migration, ...]:
    """Migration 1 as shipped, then 2 and 3 that add tables, and a 4 that fails halfway."""
    folder.mkdir()
    first = ROOT / "transports" / "db" / "migrations" / "0001_initial.sql"
    (folder / "0001_initial.sql").write_text(first.read_text())
    (folder / "0002_audit.sql").write_text(
        "-- name: audit\nCREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT NOT NULL);\n"
    )
    (folder / "0003_audit_when.sql").write_text(
        "-- name: when\nALTER TABLE audit ADD COLUMN at REAL;\n"
        "-- name: index\nCREATE INDEX audit_at ON audit (at);\n"
    )
    (folder / "0004_broken.sql").write_text(
        "-- name: fine\nCREATE TABLE half_done (x INTEGER);\n"
        "-- name: broken\nCREATE TABLE audit (duplicate INTEGER);\n"
    )
    return load_migrations(folder)


def objects(database: Database) -> set[object]:
    return {row["name"] for row in rows(database, "SELECT name FROM sqlite_master")}


def versions(database: Database) -> list[object]:
    sql = "SELECT version FROM raftflow_schema ORDER BY version"
    return [row["version"] for row in rows(database, sql)]


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    database = open_database(f"sqlite:///{tmp_path / 'schema.db'}")
    yield database
    database.close()


def test_the_shipped_migrations_are_numbered_and_idempotent_at_version_1() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, LATEST + 1))
    assert MIGRATIONS[0].name == "initial"
    # Migration 1 must also bring a database made before versions existed to version 1.
    for statement in MIGRATIONS[0].statements:
        assert "IF NOT EXISTS" in statement.sql or statement.sql.startswith("DROP TRIGGER IF")


def test_an_empty_database_is_initialized_on_connect_and_recorded_once(
    database: Database,
) -> None:
    assert database.run(read_state()).empty
    applied = database.run(ensure(auto_migrate=False))  # empty: no upgrade to refuse
    assert [m.version for m in applied] == list(range(1, LATEST + 1))
    assert versions(database) == list(range(1, LATEST + 1))
    assert database.run(ensure(auto_migrate=False)) == []  # up to date: nothing


def test_a_series_applies_in_order_stops_where_asked_and_fails_whole(
    database: Database, tmp_path: Path
) -> None:
    series = write_series(tmp_path / "series")
    applied = database.run(migrate(2, migrations=series))
    assert [m.version for m in applied] == [1, 2]
    assert "audit" in objects(database) and "audit_at" not in objects(database)
    applied = database.run(migrate(3, migrations=series))
    assert [m.version for m in applied] == [3]
    with pytest.raises(StatementError, match="already exists"):
        database.run(migrate(migrations=series))
    # Migration 4 failed at its second statement: its first one was rolled back with it.
    assert "half_done" not in objects(database)
    assert versions(database) == [1, 2, 3]


def test_racing_migrators_apply_each_migration_exactly_once(tmp_path: Path) -> None:
    series = write_series(tmp_path / "series")
    url = f"sqlite:///{tmp_path / 'race.db'}"
    results: list[list[int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4, timeout=30)

    def migrator() -> None:
        try:
            database = open_database(url)  # four at once on a new file (see the WAL switch)
            try:
                barrier.wait()
                results.append([m.version for m in database.run(migrate(3, migrations=series))])
            finally:
                database.close()
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=migrator) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not [e for e in errors if not isinstance(e, threading.BrokenBarrierError)], errors
    assert sorted(v for applied in results for v in applied) == [1, 2, 3], results
    database = open_database(url)
    try:
        assert versions(database) == [1, 2, 3]
    finally:
        database.close()


def made_before_versions(path: Path) -> str:
    """A database as raftflow 0.1 made it: migration 1's tables, no version table, and an
    execution waiting in it."""
    url = f"sqlite:///{path}"
    database = open_database(url)
    start = Statement(
        "start",
        "INSERT INTO execution_starts (id, workflow, input, priority, event, now, commit_id)"
        """ VALUES ('old-1', 'double', '21', 0, '{"kind":"run"}', 1.0, 'c1')""",
    )
    try:
        execute(database, *MIGRATIONS[0].statements)
        execute(database, start)
    finally:
        database.close()
    return url


def test_an_older_database_is_refused_until_migrated_then_its_executions_run(
    tmp_path: Path,
) -> None:
    url = made_before_versions(tmp_path / "old.db")
    with pytest.raises(SchemaOutdatedError, match="run `raftflow migrate --url"):
        Engine.from_url(url, auto_migrate=False)
    out = subprocess.run(
        [sys.executable, "-m", "raftflow", "migrate", "--url", url],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert "database schema: version 0" in out and "applied migration 1: initial" in out
    engine = Engine.from_url(url, auto_migrate=False)
    try:

        @engine.workflow
        def double(x: int) -> int:
            return 2 * x

        handle = engine.get("old-1")
        with engine.running_worker():
            assert handle.result(timeout=10) == 42
        assert handle.status() is Status.SUCCEEDED
    finally:
        engine.close()


def test_sqlite_migrates_an_older_database_on_connect_by_default(tmp_path: Path) -> None:
    url = made_before_versions(tmp_path / "old.db")
    engine = Engine.from_url(url)
    try:
        assert versions(engine.store.database) == list(range(1, LATEST + 1))
    finally:
        engine.close()


def test_a_newer_database_is_refused_by_engines_and_migrate(database: Database) -> None:
    database.run(migrate())
    future = Statement(
        "future",
        "INSERT INTO raftflow_schema (version, name, applied_at, applied_by)"
        " VALUES (?, 'from the future', 0, 'x')",
        (LATEST + 1,),
    )
    execute(database, future)
    url = f"sqlite:///{database.connection.path}"  # type: ignore[attr-defined]
    for auto_migrate in (True, False):
        with pytest.raises(SchemaTooNewError, match="upgrade raftflow"):
            Engine.from_url(url, auto_migrate=auto_migrate)
    with pytest.raises(SchemaTooNewError):
        database.run(migrate())


def test_schema_sql_is_what_the_migrations_make() -> None:
    """transports/db/schema.sql is generated, never edited: after a new migration, `make
    schema` writes it again, and this test fails until then."""
    from raftflow.transports.db.schema_file import render

    checked_in = (ROOT / "transports" / "db" / "schema.sql").read_text()
    assert checked_in == render(), "transports/db/schema.sql is stale: run `make schema`"


def test_a_connect_to_an_up_to_date_database_reads_its_version_weakly(tmp_path: Path) -> None:
    """A process's connect costs no Raft entry on a database at this code's version (a
    weak read: it lags, never leads); an older or empty one is read again through the log
    (``strong``) before anything is migrated or refused."""
    database = open_database(f"sqlite:///{tmp_path / 'levels.db'}")
    try:
        sent: list[Request] = []
        database.run(recorded(ensure(False), sent))  # empty: initialized
        assert [r.level for r in sent[:2]] == ["weak", "strong"] and len(sent) > 2
        sent.clear()
        assert database.run(recorded(ensure(False), sent)) == []
        assert [r.level for r in sent] == ["weak"]
    finally:
        database.close()
