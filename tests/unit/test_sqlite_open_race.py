"""Opening a SQLite file while another connection writes to it: the switch to WAL needs the
file to itself for an instant, and SQLite answers "locked" at once instead of waiting on
the busy timeout. Seen in CI: four migrators opening one new file at the same moment."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

from raftflow.transports.sqlite.connection import SqliteConnection


def test_opening_while_another_connection_writes_waits_for_it(tmp_path: Path) -> None:
    path = str(tmp_path / "busy.db")
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x)")
    writer.execute("BEGIN IMMEDIATE")  # still a rollback journal: the file is not WAL yet
    writer.execute("INSERT INTO t VALUES (1)")
    timer = threading.Timer(0.5, writer.execute, ("COMMIT",))
    timer.start()
    started = time.monotonic()
    connection = SqliteConnection(path)  # was: DatabaseError "database is locked" at once
    waited = time.monotonic() - started
    timer.join()
    try:
        assert 0.3 < waited < 10, waited
        mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"
    finally:
        connection.close()
        writer.close()
