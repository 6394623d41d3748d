"""Schema migrations on real 3-node rqlite clusters: an upgrade of a live deployment's
database (executions pending, mid-step, parked) while no worker runs, a leader killed in
the middle of a series of migrations, and two ``raftflow migrate`` processes at once.
Each test has a dedicated cluster: migrations change the schema everyone else shares.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.db.database import Database, open_database
from raftflow.transports.db.flow import Statement
from raftflow.transports.db.schema import LATEST, MIGRATIONS, Migration, load_migrations, migrate
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, SchemaOutdatedError
from raftflow.errors import RaftflowError
from tests.apps.ordering import Spec, expected, runs_by_execution
from tests.integration.workers import workers
from tests.support import execute, rows, wait_until

APP = "tests.apps.ordering:engine"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def versions(database: Database) -> list[int]:
    found = rows(database, "SELECT version FROM raftflow_schema ORDER BY version")
    return [int(row["version"]) for row in found]


def tables(database: Database) -> set[str]:
    found = rows(database, "SELECT name FROM sqlite_master WHERE type = 'table'")
    return {str(row["name"]) for row in found}


def start_statement(execution_id: str, spec: Spec, now: float) -> Statement:
    return Statement(
        "start",
        "INSERT INTO execution_starts (id, workflow, input, priority, event, now, commit_id)"
        " VALUES (?, 'sequence', ?, 0, ?, ?, ?)",
        (execution_id, spec.model_dump_json(), json.dumps({"kind": "run"}), now, execution_id),
    )


@pytest.mark.parametrize("previous", [0, LATEST - 1], ids=["before-versions", "previous"])
def test_a_live_database_of_the_previous_release_is_migrated_and_finished(
    rqlite_cluster_factory: Callable[..., LocalCluster], tmp_path: Path, previous: int
) -> None:
    cluster = rqlite_cluster_factory(3)
    database = open_database(cluster.urls)
    try:
        if previous == 0:  # raftflow 0.1: migration 1's statements, no version table
            execute(database, *MIGRATIONS[0].statements)
        else:  # the previous version, rows written as it wrote them (its columns only)
            database.run(migrate(previous))
        spec = Spec(log_dir=str(tmp_path), steps=3)
        now = time.time()
        execute(database, *(start_statement(f"e{i}", spec, now) for i in (1, 2, 3)))
        # e2: a worker died mid-step 2 with steps 0 and 1 recorded; its lease runs 3 s more.
        execute(
            database,
            Statement(
                "leased",
                "UPDATE messages SET locked_by = 'dead-worker:1', lock_expiry = ?,"
                " attempts = 1 WHERE group_id = 'e2'",
                (now + 3,),
            ),
            Statement("running", "UPDATE executions SET status = 'running' WHERE id = 'e2'"),
            *(
                Statement(
                    "step",
                    "INSERT INTO steps (execution_id, idx, name, status, output, started_at,"
                    " ended_at, worker_id) VALUES ('e2', ?, 'numbered', 'succeeded', ?, ?, ?,"
                    " 'dead-worker')",
                    (i, json.dumps(i * i), now, now),
                )
                for i in (0, 1)
            ),
            # e3: parked until 4 s from now.
            Statement(
                "parked",
                "UPDATE messages SET locked_by = '__parked__', lock_expiry = ? "
                "WHERE group_id = 'e3'",
                (now + 4,),
            ),
        )
        with pytest.raises(SchemaOutdatedError, match="raftflow migrate"):
            Engine.from_url(cluster.urls)
        out = subprocess.run(
            [sys.executable, "-m", "raftflow", "migrate", "--url", cluster.url],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
        assert f"database schema: version {LATEST}" in out, out
        assert versions(database) == list(range(1, LATEST + 1))
        with workers(APP, cluster.urls, 2, tmp_path):

            def finished() -> bool:
                done = rows(
                    database, "SELECT COUNT(*) AS n FROM executions WHERE status = ?", "succeeded"
                )
                return bool(done[0]["n"] == 3)

            wait_until(finished, timeout=60, interval=0.2)
        outputs = {
            row["id"]: json.loads(str(row["output"]))
            for row in rows(database, "SELECT id, output FROM executions")
        }
        assert outputs == {f"e{i}": expected(spec) for i in (1, 2, 3)}
        runs = runs_by_execution(str(tmp_path))
        assert [r["index"] for r in runs["e2"]] == [2]  # the recorded steps never re-ran
        assert runs["e2"][0]["start"] >= now + 3 - 0.5  # after the dead worker's lease
        assert runs["e3"][0]["start"] >= now + 4 - 0.5  # not before its park deadline
        assert [r["index"] for r in runs["e1"]] == [0, 1, 2]
    finally:
        database.close()


def limited_start(execution_id: str, now: float) -> Statement:
    """A start of a workflow limited to one at a time, through the start view (as versions
    9 and 10 write it)."""
    return Statement(
        "start",
        "INSERT INTO execution_starts (id, workflow, input, priority, event, now, commit_id,"
        " limit_key, limit_max) VALUES (?, 'limited', 'null', 0, ?, ?, ?, 'limited', 1)",
        (execution_id, json.dumps({"kind": "run"}), now, execution_id),
    )


def test_waiters_gated_by_version_9_are_admitted_in_order_with_those_of_version_10(
    rqlite_cluster_factory: Callable[..., LocalCluster],
) -> None:
    """Migration 10 moves the gate of a limited execution's group from a trigger of
    `groups` into the triggers that queue it: waiters queued by either version wait
    gated, and a freed slot admits the oldest of them, whichever version queued it."""
    cluster = rqlite_cluster_factory(1)
    database = open_database(cluster.urls)
    gate = 1e18

    def ready_at() -> dict[str, float]:
        found = rows(database, "SELECT group_id, ready_at FROM groups ORDER BY group_id")
        return {str(r["group_id"]): float(r["ready_at"]) for r in found}

    try:
        database.run(migrate(9))
        now = time.time()
        execute(database, *(limited_start(f"l{i}", now) for i in (1, 2, 3)))
        assert ready_at() == {"l1": 0.0, "l2": gate, "l3": gate}
        database.run(migrate())
        assert versions(database) == list(range(1, LATEST + 1))
        execute(database, limited_start("l4", now))
        assert ready_at() == {"l1": 0.0, "l2": gate, "l3": gate, "l4": gate}
        # l1 finishes (as a commit does: its status, then its event acked): l2 is admitted.
        execute(
            database,
            Statement("done", "UPDATE executions SET status = 'succeeded' WHERE id = 'l1'"),
            Statement("ack", "DELETE FROM messages WHERE group_id = 'l1'"),
        )
        assert ready_at() == {"l2": 0.0, "l3": gate, "l4": gate}
        execute(
            database,
            Statement("done", "UPDATE executions SET status = 'succeeded' WHERE id = 'l2'"),
            Statement("ack", "DELETE FROM messages WHERE group_id = 'l2'"),
        )
        assert ready_at() == {"l3": 0.0, "l4": gate}
        admitted = rows(database, "SELECT id, admitted FROM executions ORDER BY id")
        assert [(r["id"], r["admitted"]) for r in admitted] == [
            ("l1", 1), ("l2", 1), ("l3", 1), ("l4", 0),
        ]  # fmt: skip
    finally:
        database.close()


def write_series(folder: Path, count: int) -> tuple[Migration, ...]:
    folder.mkdir()
    first = ROOT / "transports" / "db" / "migrations" / "0001_initial.sql"
    (folder / "0001_initial.sql").write_text(first.read_text())
    for n in range(2, count + 1):
        (folder / f"{n:04d}_t{n}.sql").write_text(
            f"-- name: table\nCREATE TABLE t{n} (id INTEGER PRIMARY KEY, v TEXT);\n"
            f"-- name: index\nCREATE INDEX t{n}_v ON t{n} (v);\n"
            f"-- name: row\nINSERT INTO t{n} (v) VALUES ('migration {n}');\n"
        )
    return load_migrations(folder)


def assert_whole(database: Database, series: tuple[Migration, ...]) -> int:
    """Every recorded migration applied whole, no unrecorded one applied at all."""
    done = versions(database)
    assert done == list(range(1, len(done) + 1)), done
    present = tables(database)
    for migration in series[1:]:
        name = f"t{migration.version}"
        if migration.version in done:
            assert name in present
            assert rows(database, f"SELECT COUNT(*) AS n FROM {name}")[0]["n"] == 1
        else:
            assert name not in present, (name, done)
    return len(done)


def test_a_leader_killed_mid_migration_leaves_each_one_whole_and_a_rerun_completes(
    rqlite_cluster_factory: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = rqlite_cluster_factory(3)
    series = write_series(tmp_path / "series", 300)
    outcome: dict[str, Any] = {}
    setup = open_database(cluster.urls)
    try:  # an empty database would get them all in one transaction: start from version 1
        setup.run(migrate(1, migrations=series))
    finally:
        setup.close()

    def migrator() -> None:
        database = open_database(cluster.urls, retry_timeout=0.5)
        try:
            outcome["applied"] = database.run(migrate(migrations=series))
        except RaftflowError as exc:
            outcome["error"] = exc
        finally:
            database.close()

    thread = threading.Thread(target=migrator)
    thread.start()
    database = open_database(cluster.urls)
    try:
        wait_until(
            lambda: "raftflow_schema" in tables(database) and len(versions(database)) > 5, 20
        )
        leader = cluster.leader()
        cluster.kill(leader)
        thread.join(60)
        assert not thread.is_alive()
        cluster.start_node(leader)
        cluster.wait_ready()
        reached = assert_whole(database, series)
        assert reached < len(series), "the kill came too late to interrupt anything"
        rerun = database.run(migrate(migrations=series))
        assert assert_whole(database, series) == len(series)
        applied = [m.version for m in outcome.get("applied", [])] + [m.version for m in rerun]
        # Nothing applied twice; what neither call claims is an ambiguous attempt that
        # did apply (the version row says so: checked whole above).
        assert len(applied) == len(set(applied))
    finally:
        database.close()


def test_two_migrate_processes_at_once_apply_each_migration_once(
    rqlite_cluster_factory: Callable[..., LocalCluster],
) -> None:
    cluster = rqlite_cluster_factory(3)
    command = [sys.executable, "-m", "raftflow", "migrate", "--url", cluster.url]
    processes = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60)[0] for p in processes]
    assert all(p.returncode == 0 for p in processes), outputs
    applied = [line for out in outputs for line in out.splitlines() if line.startswith("applied")]
    by_version = sorted(applied, key=lambda line: int(line.split()[2].rstrip(":")))
    assert by_version == [f"applied migration {m.version}: {m.name}" for m in MIGRATIONS]
    database = open_database(cluster.urls)
    try:
        assert versions(database) == list(range(1, LATEST + 1))
    finally:
        database.close()
