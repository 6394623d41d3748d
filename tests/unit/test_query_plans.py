"""The hot path's statements reach rows through indexes, never by scanning a table: their
cost must not grow with the number of queued messages or stored executions. Checked with
SQLite's EXPLAIN QUERY PLAN on the shared schema (rqlite runs the same SQLite and the
same SQL; it only explains reads, so the plans are checked here)."""

from __future__ import annotations

import sqlite3

import pytest
from raftflow.engine.runtime.schedules import SQL as SCHEDULES
from raftflow.stores.flows import QUERIES as STORE
from raftflow.stores.inspect import OPS
from raftflow.stores.retention import SQL as RETENTION
from raftflow.stores.streams import SQL as STREAMS
from raftflow.transports.db.catalogue import Catalogue
from raftflow.transports.db.schema import MIGRATIONS
from raftflow.transports.queue import QUERIES as QUEUE

TABLES = (
    "messages",
    "groups",
    "executions",
    "steps",
    "message_keys",
    "signals",
    "events",
    "workers",
    "worker_duties",
    "rate_slots",
    "streams",
)
HOT_PATH = [
    (QUEUE, "publish"),
    (QUEUE, "claim"),
    (QUEUE, "claim_served"),
    (QUEUE, "touch_claimed_groups"),
    (QUEUE, "claimed"),
    (QUEUE, "claimable"),
    (QUEUE, "claimable_served"),
    (QUEUE, "ack"),
    (QUEUE, "nack"),
    (QUEUE, "extend"),
    (QUEUE, "forget_keys"),
    (QUEUE, "release_group"),
    (STORE, "start"),
    (STORE, "start_direct"),
    (STORE, "start_direct_event"),
    (STORE, "commit"),
    (STORE, "commit_outcome"),
    (STORE, "lean_commit"),
    (STORE, "lean_step"),
    (STORE, "lean_outcome"),
    (STORE, "lean_final"),
    (STORE, "lean_final_unlinked"),
    (STORE, "lean_final_step"),
    (STORE, "lean_final_ack"),
    (STORE, "lean_finals"),
    (STORE, "lean_finals_steps"),
    (STORE, "lean_finals_ack"),
    (STORE, "final_outcome"),
    (STORE, "start_outcome"),
    (STORE, "steps_page"),
    (STORE, "mark_claimed_running"),
    (STORE, "claimed_executions"),
    (STORE, "claimed_steps"),
    (STORE, "claimed_signals"),
    (STORE, "claimed_children"),
    (STORE, "send"),
    (STORE, "cancel"),
    (STORE, "status"),
    (STORE, "set_event"),
    (STORE, "get_event"),
    (STORE, "children"),
    (STORE, "get"),
    (STORE, "steps"),
    (STORE, "list_by_status"),
    (STORE, "set_trace_context"),
    (STORE, "rate_forget"),
    (STORE, "rate_reserve"),
    (STORE, "rate_reserved"),
    # What operators read (CLI, dashboard) and what workers write about themselves.
    (STORE, "list_recent"),
    (STORE, "list_by_status_since"),
    (STORE, "list_by_workflow"),
    (STORE, "list_by_workflow_status"),
    (STORE, "count_by_status_since"),
    (OPS, "queue_depth"),
    (OPS, "parked"),
    (OPS, "limit_waiting"),
    (OPS, "leases"),
    (OPS, "signals_of"),
    (OPS, "events_of"),
    (OPS, "messages_of"),
    (OPS, "workers_seen"),
    (OPS, "beat"),
    (OPS, "forget_workers"),
    (OPS, "take_duty"),
    (OPS, "duty_holder"),
    (OPS, "drop_duty"),
    # Cron schedules (stores/schedules.sql) and retention (stores/retention.sql).
    (SCHEDULES, "ensure"),
    (SCHEDULES, "respec"),
    (SCHEDULES, "relane"),
    (SCHEDULES, "fire"),
    (SCHEDULES, "fired"),
    (SCHEDULES, "list"),
    (SCHEDULES, "remove"),
    (SCHEDULES, "present"),
    (RETENTION, "expired_any"),
    (RETENTION, "delete_steps"),
    (RETENTION, "delete_signals"),
    (RETENTION, "delete_events"),
    (RETENTION, "delete_streams"),
    (RETENTION, "delete_messages"),
    (RETENTION, "delete_executions"),
    # Durable streams (stores/streams.sql): a write (in a step's commit), a live one (from a
    # running step) and the reads.
    (STREAMS, "write"),
    (STREAMS, "write_live"),
    (STREAMS, "close"),
    (STREAMS, "state"),
    (STREAMS, "read"),
    (STREAMS, "status"),
    (STREAMS, "keys"),
]
PARAMS = {
    "token": "t",
    "worker_id": "w",
    "now": 1.0,
    "expiry": 2.0,
    "limit": 8,
    "min_priority": 0,
    "id": "x",
    "execution_id": "x",
    "lease_token": "t",
    "commit_id": "c",
    "status": "pending",
    "seq": 1,
    "group_id": "g",
    "event": "{}",
    "priority": 0,
    "key": "k",
    "cutoff": 0.0,
    "locked_by": None,
    "commits": "[]",
    "topic": "",
    "payload": "1",
    "reason": "r",
    "page": 1000,
    "first": 0,
    "cached": "{}",
    "value": "1",
    "since": 0.0,
    "workflow": "w",
    "trace_context": "{}",
    "duty": "d",
    "host": "h",
    "pid": 1,
    "version": "v",
    "concurrency": 1,
    "state": "running",
    "started_at": 0.0,
    "steps": 0,
    "running": 0,
    "at": 1.0,
    "cron": "* * * * *",
    "timezone": "UTC",
    "catch_up": 1,
    "starts": "[]",
    "next_at": 2.0,
    "batch": 100,
    "groups": "[]",
    "per": 1.0,
    "lane": "default/w",
    "lanes": '["", "default/w", "billing/x"]',
    "run": 1,
    "call_idx": 0,
    "max_values": 10,
    "position": 0,
    **dict.fromkeys(
        [
            "parent_id",
            "deadline",
            "lease_token",
            "lease_expiry",
            "input",
            "lease_seq",
            "step_idx",
            "step_name",
            "step_status",
            "step_output",
            "step_error",
            "step_started_at",
            "step_kind",
            "step_attempts",
            "step_wake_at",
            "output",
            "error",
            "next_event",
            "next_priority",
            "next_token",
            "next_expiry",
            "limit_key",
            "limit_max",
            "debounce_until",
        ],
        None,
    ),
}


@pytest.fixture(scope="module")
def db() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    for migration in MIGRATIONS:
        for statement in migration.statements:
            connection.execute(statement.sql)
    return connection


@pytest.mark.parametrize("catalogue, name", HOT_PATH, ids=[f"{c.prefix}.{n}" for c, n in HOT_PATH])
def test_no_table_scan(db: sqlite3.Connection, catalogue: Catalogue, name: str) -> None:
    plan = [row[3] for row in db.execute(catalogue.explain(name).sql, PARAMS)]
    scans = [step for step in plan if step.startswith("SCAN") and step.split()[1] in TABLES]
    assert not scans, plan


def test_claim_walks_the_ready_index_per_priority(db: sqlite3.Connection) -> None:
    plan = "\n".join(row[3] for row in db.execute(QUEUE.explain("claim").sql, PARAMS))
    assert plan.count("USING INDEX groups_ready (priority=? AND ready_at<?)") == 5
    assert "USING COVERING INDEX messages_by_group (group_id=?)" in plan


def test_a_served_claim_walks_the_lane_index_per_lane_and_priority(
    db: sqlite3.Connection,
) -> None:
    """Its cost follows the lanes it serves, whatever else waits: each lane's and
    priority's ready groups from the index, the lanes first (the join order is fixed)."""
    for name in ("claim_served", "claimable_served"):
        plan = [row[3] for row in db.execute(QUEUE.explain(name).sql, PARAMS)]
        text = "\n".join(plan)
        assert "groups_served (lane=? AND priority=? AND ready_at<?)" in text, plan
        assert "groups_ready" not in text, plan
        lanes = next(i for i, step in enumerate(plan) if step.startswith("SCAN l VIRTUAL"))
        groups = next(i for i, step in enumerate(plan) if step.startswith("SEARCH g "))
        assert lanes < groups, plan


def test_operator_lists_walk_their_index(db: sqlite3.Connection) -> None:
    def plan(name: str) -> str:
        return "\n".join(row[3] for row in db.execute(STORE.explain(name).sql, PARAMS))

    assert "executions_by_workflow (workflow=? AND created_at>?)" in plan("list_by_workflow")
    assert "executions_by_workflow (workflow=? AND created_at>?)" in plan("list_by_workflow_status")
    assert "executions_by_status (status=? AND created_at>?)" in plan("count_by_status_since")
    assert "executions_by_created (created_at>?)" in plan("list_recent")
    leases = "\n".join(row[3] for row in db.execute(OPS.explain("leases").sql, PARAMS))
    assert leases.count("messages_by_token (locked_by<?)") == 1
    assert leases.count("messages_by_token (locked_by>?)") == 1


def test_the_limit_waiters_walk_the_pending_executions(db: sqlite3.Connection) -> None:
    """The queue page's waiters per limit key: the pending executions (not every limited
    execution ever run), each key's slots held on the limit index."""
    plan = "\n".join(row[3] for row in db.execute(OPS.explain("limit_waiting").sql, PARAMS))
    assert "executions_by_status (status=?)" in plan, plan
    assert "executions_by_limit (limit_key=? AND admitted=? AND status=?)" in plan, plan


def test_retention_walks_the_finished_index(db: sqlite3.Connection) -> None:
    """Not the status index: that one sorts every finished execution for each batch."""
    for name in ("expired_any", "delete_steps", "delete_executions"):
        plan = " ".join(row[3] for row in db.execute(RETENTION.explain(name).sql, PARAMS))
        assert "USING INDEX executions_finished" in plan, (name, plan)
        assert "TEMP B-TREE" not in plan, (name, plan)
        # A child's parent (does it still run?) by its id, not by a scan.
        assert "SEARCH p USING INDEX sqlite_autoindex_executions_1 (id=?)" in plan, (name, plan)


@pytest.mark.parametrize(
    "sql",
    [
        # The reads of the `limit_open` trigger (migration 9), run by every start and
        # every finish of a limited execution: the key's slots held, its oldest waiters.
        "SELECT COUNT(*) FROM executions WHERE limit_key = :k AND admitted = 1"
        " AND status IN ('pending', 'running')",
        "SELECT rowid FROM executions WHERE limit_key = :k AND admitted = 0"
        " AND status = 'pending' ORDER BY rowid LIMIT 3",
    ],
)
def test_the_limit_triggers_walk_the_limit_index(db: sqlite3.Connection, sql: str) -> None:
    plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", {"k": "wf:a"})]
    assert all("executions_by_limit" in step for step in plan if "executions" in step), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan  # FIFO is the index order
