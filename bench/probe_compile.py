"""What each statement of the step path costs SQLite to prepare (docs/performance.md,
"Latency").

``python -m bench.probe_compile [--n N]`` migrates a scratch SQLite file and prepares each
statement ``N`` times with ``EXPLAIN`` (which compiles the statement and every trigger
program it may fire, and runs nothing), printing the mean time and the number of VDBE
instructions. rqlite 8.26 prepares every statement anew for every request, on every node
-- the leader before it answers -- so this is a cost each request pays three times over on
a 3-node cluster, whatever it then does. An UPDATE of ``executions.status`` compiles the
status triggers (and what their statements fire in turn); an INSERT into ``messages``
compiles the group triggers; a view's INSTEAD OF trigger compiles its whole body.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from raftflow.engine.workflow.events import RUN_TEXT
from raftflow.stores.claim import claim_context
from raftflow.stores.commit import Commit
from raftflow.stores.commit_sql import commit_request, final_statements, lean_statements
from raftflow.stores.flows import QUERIES as STORE
from raftflow.stores.flows import start_params
from raftflow.stores.records import Status
from raftflow.transports.db.flow import Statement
from raftflow.transports.queue import QUERIES as QUEUE

from raftflow import Engine

RAW = Statement("probe.raw", "INSERT INTO probe_raw (v) VALUES (:v)", {"v": 1})


def statements() -> list[Statement]:
    """The step path's statements, with plausible parameters."""
    start = start_params(
        "e", "wf", "null", 0, RUN_TEXT, 1.0, "c", lease_token="t", lease_expiry=2.0
    )
    outcome = {"id": "e", "commit_id": "c", "lease_token": "t"}
    final = Commit(
        execution_id="e", lease_seq=1, lease_token="t", worker_id="w", step_idx=0,
        step_name="s", step_status="succeeded", step_output="1", step_started_at=1.0,
        status=Status.SUCCEEDED, output="1",
    )  # fmt: skip
    lean = Commit(
        execution_id="e", lease_seq=1, lease_token="t", worker_id="w", step_idx=0,
        step_name="s", step_status="succeeded", step_output="1", step_started_at=1.0,
        status=Status.RUNNING, next_token="t",
    )  # fmt: skip
    parked = Commit(
        execution_id="e", lease_seq=1, lease_token="t", worker_id="w", step_idx=0,
        step_name="s", step_status="succeeded", step_output="1", step_started_at=1.0,
        status=Status.RUNNING, next_event=RUN_TEXT, park_until=5.0,
    )  # fmt: skip
    claim = {"token": "t", "expiry": 2.0, "now": 1.0, "limit": 1, "min_priority": 0}
    return [
        RAW,
        STORE("start", start),
        STORE("start_outcome", outcome),
        STORE("start_direct", {**start, "trace_context": None}),
        STORE("start_direct_event", {**start, "trace_context": None}),
        QUEUE("claimable", claim),
        QUEUE("claim", claim),
        *claim_context("t", 1.0, {}),
        *lean_statements([lean], 1.0),
        *final_statements([final], 1.0),
        final_statements([Commit(**{**_fields(final), "unlinked": True})], 1.0)[0],
        *commit_request([parked], 1.0, 2.0).statements,
    ]


def _fields(commit: Commit) -> dict[str, Any]:
    return {name: getattr(commit, name) for name in Commit.__dataclass_fields__}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "compile.db"
        Engine.from_url(f"sqlite:///{path}", auto_migrate=True).close()
        db = sqlite3.connect(path, cached_statements=0, isolation_level=None)
        db.execute("CREATE TABLE probe_raw (v INTEGER)")
        print(f"{'statement':32s} {'compile us':>10s} {'VDBE ops':>9s}")
        for statement in statements():
            params = dict(statement.params)
            sql = "EXPLAIN " + statement.sql
            ops = len(db.execute(sql, params).fetchall())
            started = time.perf_counter()
            for _ in range(args.n):
                db.execute(sql, params).fetchall()
            micros = (time.perf_counter() - started) / args.n * 1e6
            print(f"{statement.name:32s} {micros:10.0f} {ops:9d}")
        db.close()


if __name__ == "__main__":
    main()
