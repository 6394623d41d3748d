"""raftflow's statements in SQLite alone (Python's ``sqlite3``, in memory, no rqlite), for
``--mode cost``: what a statement costs to *prepare* and to *run*, and which statements of
the claim request grow with the number of pending executions.

rqlite 8.26 prepares every statement anew on every node; Python's ``sqlite3`` caches
prepared statements unless ``cached_statements=0``. Timing both separates the two costs.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any


def _database(cache: int) -> sqlite3.Connection:
    from raftflow.transports.db.schema import MIGRATIONS

    db = sqlite3.connect(":memory:", isolation_level=None, cached_statements=cache)
    for migration in MIGRATIONS:
        for statement in migration.statements:
            db.execute(statement.sql)
    return db


def _start(db: sqlite3.Connection, first: int, last: int, event: str, now: float) -> None:
    from raftflow.stores.flows import QUERIES as STORE
    from raftflow.stores.flows import start_params

    sql = STORE.queries["start"]
    db.execute("BEGIN")
    for i in range(first, last):
        db.execute(sql, start_params(f"e{i:07d}", "chain", "{}", 0, event, now, "c"))
    db.execute("COMMIT")


def commit_cost(commits: int = 3000) -> dict[str, float]:
    """ms per commit (the batch statement with one commit, + outcome read), with and
    without a statement cache."""
    from raftflow.engine.workflow.events import RUN
    from raftflow.stores.commit import Commit
    from raftflow.stores.commit_sql import commit_request
    from raftflow.stores.records import Status
    from raftflow.transports.payload import to_json
    from raftflow.transports.queue import QUERIES as QUEUE

    event = to_json(RUN, what="event")
    out: dict[str, float] = {}
    for cache in (128, 0):
        db = _database(cache)
        now = time.time()
        _start(db, 0, 10, event, now)
        db.execute(
            QUEUE.queries["claim"],
            {"token": "t", "now": now, "expiry": now + 3600, "limit": 10, "min_priority": 0},
        )
        seqs = dict(
            (g, s) for s, g in db.execute("SELECT seq, group_id FROM messages WHERE locked_by='t'")
        )
        ids = sorted(seqs)
        started = time.process_time()
        for step in range(commits // len(ids)):
            for e in ids:
                commit = Commit(
                    execution_id=e, lease_seq=seqs[e], lease_token="t", worker_id="w",
                    step_idx=step, step_name="tick", step_status="succeeded", step_output="1",
                    step_started_at=now, status=Status.RUNNING, next_event=event,
                    next_token="t",
                )  # fmt: skip
                write, read = commit_request([commit], now, now + 3600).statements
                db.execute(write.sql, write.params)
                row = db.execute(read.sql, read.params).fetchone()
                seqs[e] = row[2]
        out[f"commit_ms_cache_{cache}"] = round((time.process_time() - started) / commits * 1000, 4)
        db.close()
    return out


def claim_statement_costs(sizes: list[int], repeats: int = 20) -> dict[str, Any]:
    """ms per statement of the worker's claim request with ``n`` executions pending,
    and the query plan of each statement at the largest size."""
    from raftflow.engine.workflow.events import RUN
    from raftflow.stores.flows import QUERIES as STORE
    from raftflow.transports.payload import to_json
    from raftflow.transports.queue import QUERIES as QUEUE

    event = to_json(RUN, what="event")
    statements = [
        (QUEUE, "claim"),
        (QUEUE, "touch_claimed_groups"),
        (QUEUE, "claimed"),
        (STORE, "mark_claimed_running"),
        (STORE, "claimed_executions"),
        (STORE, "claimed_steps"),
    ]
    db = _database(128)
    rows: list[dict[str, Any]] = []
    have = 0
    now = time.time()
    params: dict[str, Any] = {}
    for size in sizes:
        _start(db, have, size, event, now)
        have = size
        spent = {name: 0.0 for _, name in statements}
        for rep in range(-1, repeats):  # rep -1 warms the statement cache up, untimed
            t = time.time()
            params = {
                "token": f"t{size}-{rep}",
                "now": t,
                "expiry": t + 30,
                "limit": 16,
                "min_priority": 0,
                "page": 1000,
                "cached": "{}",
            }
            for catalogue, name in statements:
                started = time.perf_counter()
                db.execute(catalogue.queries[name], params).fetchall()
                if rep >= 0:
                    spent[name] += time.perf_counter() - started
            db.execute(
                "UPDATE messages SET locked_by = NULL, lock_expiry = 0 WHERE locked_by = ?",
                (params["token"],),
            )
        rows.append(
            {"pending": size, **{k: round(v / repeats * 1000, 3) for k, v in spent.items()}}
        )
    plans = {
        name: [str(r[3]) for r in db.execute("EXPLAIN QUERY PLAN " + cat.queries[name], params)]
        for cat, name in statements
    }
    db.close()
    return {"rows": rows, "plans": plans, "sqlite": sqlite3.sqlite_version}
