"""The chaos checker itself: it passes a clean run and flags every planted violation.

No cluster: raftflow's real schema in an in-memory SQLite database stands in for the
cluster's tables, and step logs are written by hand.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.db.schema import MIGRATIONS

from tests.apps.ordering import Spec
from tests.chaos import invariants
from tests.chaos.invariants import Started

pytestmark = pytest.mark.chaos

W0, W1 = ("w0", 100), ("w1", 101)


class SqliteDb:
    """What :func:`invariants.check` needs of :class:`tests.chaos.db.Db`, on SQLite."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.row_factory = sqlite3.Row
        for migration in MIGRATIONS:
            for statement in migration.statements:
                self.conn.execute(statement.sql)

    def query(self, sql: str, *params: Any, level: str = "strong") -> list[dict[str, Any]]:
        return [dict(row) for row in self.conn.execute(sql, params)]

    def execution(self, execution_id: str, steps: int, output: Any = "auto") -> None:
        result = [i * i for i in range(steps)] if output == "auto" else output
        self.conn.execute(
            "INSERT INTO executions (id, workflow, status, input, output, created_at, "
            "updated_at, steps_done) VALUES (?, 'sequence', 'succeeded', '{}', ?, 0, 0, ?)",
            (execution_id, json.dumps(result), steps),
        )

    def step(self, execution_id: str, idx: int, worker_id: str, output: int | None = None) -> None:
        self.conn.execute(
            "INSERT INTO steps (execution_id, idx, name, status, output, started_at, ended_at, "
            "worker_id) VALUES (?, ?, 'numbered', 'succeeded', ?, 0, 0, ?)",
            (execution_id, idx, json.dumps(idx * idx if output is None else output), worker_id),
        )


def _log(log_dir: Path, pid: int, execution: str, index: int, start: float, end: float) -> None:
    line = {"execution": execution, "index": index, "start": start, "end": end, "pid": pid}
    with (log_dir / f"{pid}.jsonl").open("a") as file:
        file.write(json.dumps(line) + "\n")


def _clean(db: SqliteDb, log_dir: Path) -> dict[str, Started]:
    """Two executions of three steps, run and recorded properly by w0 and w1."""
    started = {}
    for n, (worker_id, pid) in enumerate((W0, W1)):
        execution_id = f"e{n}"
        started[execution_id] = Started("sequence", Spec(log_dir=str(log_dir), steps=3))
        db.execution(execution_id, 3)
        for idx in range(3):
            db.step(execution_id, idx, worker_id)
            _log(log_dir, pid, execution_id, idx, 10.0 + idx, 10.5 + idx)
    return started


def _check(db: SqliteDb, started: dict[str, Started], log_dir: Path, **kwargs: Any) -> Any:
    return invariants.check(
        db,  # type: ignore[arg-type]
        started,
        log_dir,
        worker_pids={W0[0]: W0[1], W1[0]: W1[1]},
        **kwargs,
    )


def test_a_clean_run_passes(tmp_path: Path) -> None:
    db = SqliteDb()
    started = _clean(db, tmp_path)
    tally = _check(db, started, tmp_path)
    assert (tally.executions, tally.steps, tally.step_runs, tally.reruns) == (2, 6, 6, 0)


def test_every_planted_violation_is_reported(tmp_path: Path) -> None:
    db = SqliteDb()
    started = _clean(db, tmp_path)
    started["lost"] = Started("sequence", Spec(log_dir=str(tmp_path), steps=3))
    db.conn.execute("UPDATE executions SET output = '[0, 1, 5]' WHERE id = 'e1'")
    db.conn.execute("DELETE FROM steps WHERE execution_id = 'e0' AND idx = 1")
    _log(tmp_path, W1[1], "e0", 2, 12.2, 12.9)  # overlaps w0's run of step 2
    db.execution("ghost", 1)
    db.step("ghost", 0, "w9")
    db.conn.execute(
        "INSERT INTO messages (group_id, event, locked_by, lock_expiry) "
        "VALUES ('nowhere', '{}', 'w0:t', 99)"
    )
    db.conn.execute("INSERT INTO groups (group_id) VALUES ('empty')")
    with pytest.raises(AssertionError) as failure:
        _check(db, started, tmp_path)
    report = str(failure.value)
    for expected in (
        "execution lost was started but does not exist",
        "execution ghost exists but was never started",
        "execution e1: succeeded with output [0, 1, 5]",
        "execution e0: steps [0, 2]",
        "execution e0: overlapping step runs",
        "step ghost/0 recorded by unknown worker w9",
        "message left in the queue",
        "groups row without messages: empty",
        "of missing execution nowhere",
    ):
        assert expected in report, f"{expected!r} not in:\n{report}"


def test_runs_of_killed_or_fenced_workers_are_excused(tmp_path: Path) -> None:
    db = SqliteDb()
    started = _clean(db, tmp_path)
    _log(tmp_path, W1[1], "e0", 2, 12.2, 12.9)  # a concurrent, unrecorded re-run
    with pytest.raises(AssertionError, match="overlapping"):
        _check(db, started, tmp_path)
    assert _check(db, started, tmp_path, excused_pids={W1[1]}).reruns == 1
    assert _check(db, started, tmp_path, fenced={(W1[1], "e0")}).excused_runs == 1


def test_a_completed_step_run_again_by_a_healthy_worker_is_reported(tmp_path: Path) -> None:
    """A step's side effect repeated, in order and overlapping nothing: only the count of
    its runs (its own log) shows it; the primary key of its one record cannot."""
    db = SqliteDb()
    started = _clean(db, tmp_path)
    _log(tmp_path, W0[1], "e0", 1, 11.6, 11.8)  # after its recorded run, before step 2
    with pytest.raises(AssertionError) as failure:
        _check(db, started, tmp_path)
    assert "step e0/1 ran 2 times as its code saw it (pids [100, 100]" in str(failure.value)
    assert "overlapping" not in str(failure.value) and "out of order" not in str(failure.value)
    # Re-runs the model allows: a worker killed or stalled, or refused its commit.
    assert _check(db, started, tmp_path, excused_pids={W0[1]}).reruns == 1
    assert _check(db, started, tmp_path, fenced={(W0[1], "e0")}).reruns == 1


def test_a_step_recorded_by_a_worker_that_did_not_run_it_is_reported(tmp_path: Path) -> None:
    db = SqliteDb()
    started = _clean(db, tmp_path)
    db.conn.execute("UPDATE steps SET worker_id = 'w1' WHERE execution_id = 'e0' AND idx = 0")
    with pytest.raises(AssertionError, match=r"recorded by w1 \(pid 101\), which has no run"):
        _check(db, started, tmp_path)


def test_fenced_executions_are_read_from_worker_logs(tmp_path: Path) -> None:
    log = tmp_path / "worker-0.log"
    log.write_text(
        "x WARNING raftflow.worker: execution e1: step not recorded (lease lost); another\n"
        "x WARNING raftflow.worker: execution e2: lease lost during a step; refused\n"
        "x INFO raftflow.worker: execution e3: something else\n"
        "x WARNING raftflow.worker: execution e4: its commit failed (X); handing it back\n"
    )
    assert invariants.fenced_executions(log) == {"e1", "e2", "e4"}
    assert invariants.fenced_executions(tmp_path / "missing.log") == set()
