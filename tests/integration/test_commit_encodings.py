"""Every commit that has a lean encoding writes what the full one (the ``execution_commits``
trigger) writes, on the session's 3-node rqlite cluster and on a SQLite file.

stores/commit_sql.py encodes a commit three ways for speed; the trigger of migration 2 is
the reference. test_final_commits.py proves it for an execution's outcome (every scenario
of the trigger chain); this file proves it for the rest: a step recorded within a worker's
turn, of every kind a lean commit takes, succeeded or failed, plain or with a transaction
step's writes. Sent lean and sent full, the same commit leaves the same step record, the
same user rows, and the execution as readers see it, with its event still leased to the
worker. What differs is named in :data:`BOOKKEEPING` and is bookkeeping only: the full
commit acks the event and publishes the next (a new seq, its group's ``last_claimed_at``
stamped as by a claim) and stamps the execution's ``updated_at``, ``commit_id`` and
``steps_done``; the lean one leaves those alone (migration 3) and marks the step record with
its commit id instead (how an ambiguous retry tells it applied).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest
from raftflow.engine.workflow.events import RUN_TEXT
from raftflow.stores.commit import LEAN_KINDS, Commit, CommitOutcome, Write
from raftflow.stores.records import Status
from raftflow.stores.store import SqlStore
from raftflow.transports.db.flow import Request, Statement

from tests.integration.conftest import NOW
from tests.integration.test_final_commits import WORKER, commit, leased_start, names, snapshot
from tests.support import execute, rows

#: Where the two encodings may differ: which commit applied, and when, never the run's state.
BOOKKEEPING = {
    "executions": ("updated_at", "commit_id", "steps_done"),
    "steps": ("commit_id",),
    "groups": ("last_claimed_at",),
}

ERROR = '{"type":"ValueError","message":"no","traceback":""}'

#: (kind, status, output, error) of every lean-eligible record.
RECORDS = [
    ("step", "succeeded", '{"n":2}', None),
    ("step", "failed", None, ERROR),
    ("sleep", "succeeded", "null", None),
    ("send", "succeeded", "null", None),
    ("child", "succeeded", '"P:child"', None),
    ("event", "succeeded", "null", None),
    ("stream", "succeeded", "null", None),
    ("stream", "failed", None, ERROR),
]


def in_turn(p: str, seq: int, kind: str, status: str, output: Any, error: Any) -> Commit:
    """A call recorded within the worker's turn: the event stays leased to it."""
    return Commit(
        execution_id=f"{p}e", lease_seq=seq, lease_token=f"{p}t", worker_id=WORKER,
        commit_id=f"{p}c", step_idx=0, step_name="s", step_kind=kind, step_status=status,
        step_output=output, step_error=error, step_started_at=NOW - 1, status=Status.RUNNING,
        next_event=RUN_TEXT, next_token=f"{p}t",
    )  # fmt: skip


def seen(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The rows without their bookkeeping, and the messages without what differs between
    keeping an event and publishing its successor."""
    out = {
        table: [
            {k: v for k, v in row.items() if k not in BOOKKEEPING.get(table, ())} for row in found
        ]
        for table, found in tables.items()
    }
    out["messages"] = [
        {"group_id": m["group_id"], "locked_by": m["locked_by"]} for m in tables["messages"]
    ]
    return out


def both(store: SqlStore, make: Any) -> tuple[str, str]:
    """Run ``make(prefix)`` for a lean and a full copy; their prefixes."""
    run = uuid.uuid4().hex[:6]
    return make(f"{run}-lean-"), make(f"{run}-full-")


@pytest.mark.parametrize(("kind", "status", "output", "error"), RECORDS, ids=lambda v: str(v))
def test_a_call_within_a_turn_lean_writes_what_the_full_commit_writes(
    store: SqlStore, kind: str, status: str, output: Any, error: Any
) -> None:
    assert kind in LEAN_KINDS
    commits: dict[str, Commit] = {}

    def make(p: str) -> str:
        seq = leased_start(store, f"{p}e", f"{p}t")
        commits[p] = in_turn(p, seq, kind, status, output, error)
        return p

    lean_p, full_p = both(store, make)
    lean, full = commits[lean_p], replace(commits[full_p], full=True)
    assert lean.lean and not full.lean
    sent: list[Request] = []
    lean_outcome = commit(store, lean, sent)
    assert names(sent) == ["store.lean_step"]
    assert lean_outcome == CommitOutcome(True, next_seq=lean.lease_seq, next_expiry=None)
    sent = []
    full_outcome = commit(store, full, sent)
    assert names(sent) == ["store.commit", "store.commit_outcome"]
    assert full_outcome.applied and full_outcome.next_seq != full.lease_seq
    lean_rows, full_rows = snapshot(store, lean_p), snapshot(store, full_p)
    assert seen(lean_rows) == seen(full_rows)
    (step,) = lean_rows["steps"]
    assert (step["kind"], step["status"], step["ended_at"]) == (kind, status, NOW)
    (message,) = lean_rows["messages"]  # still leased to the worker: its turn goes on
    assert message["locked_by"] == "P:t"


def test_the_stale_lease_of_a_call_within_a_turn_writes_nothing_either_way(
    store: SqlStore,
) -> None:
    commits: dict[str, Commit] = {}

    def make(p: str) -> str:
        seq = leased_start(store, f"{p}e", f"{p}t")
        commits[p] = replace(in_turn(p, seq, "step", "succeeded", "1", None), lease_token="x")
        return p

    lean_p, full_p = both(store, make)
    before = {p: snapshot(store, p) for p in (lean_p, full_p)}
    assert commit(store, commits[lean_p]) == CommitOutcome(False, error="lease lost")
    assert commit(store, replace(commits[full_p], full=True)) == CommitOutcome(
        False, error="lease lost"
    )
    assert snapshot(store, lean_p) == before[lean_p]
    assert snapshot(store, full_p) == before[full_p]


@pytest.fixture
def ledger(store: SqlStore) -> str:
    table = f"enc_ledger_{uuid.uuid4().hex[:8]}"
    sql = f"CREATE TABLE {table} (k TEXT PRIMARY KEY, v INTEGER NOT NULL)"
    execute(store.database, Statement("test.create", sql))
    return table


def test_a_transaction_step_lean_writes_what_the_full_commit_writes(
    store: SqlStore, ledger: str
) -> None:
    """The step's writes and its record go together, whichever way the record is sent."""
    commits: dict[str, Commit] = {}

    def make(p: str) -> str:
        seq = leased_start(store, f"{p}e", f"{p}t")
        insert = Statement("test.write", f"INSERT INTO {ledger} (k, v) VALUES (?, ?)", (p, 7))
        writes = (Write(insert, expect_rows=1),)
        commits[p] = replace(in_turn(p, seq, "step", "succeeded", "7", None), writes=writes)
        return p

    lean_p, full_p = both(store, make)
    lean, full = commits[lean_p], replace(commits[full_p], full=True)
    assert lean.lean and lean.transactional and not full.lean
    for c in (lean, full):
        sent: list[Request] = []
        assert commit(store, c, sent).applied
        assert sent[0].transaction  # one request, one transaction
        assert names(sent)[0] == "store.transaction_fence"
        assert ("store.lean_step" in names(sent)) is (c is lean)
    assert seen(snapshot(store, lean_p)) == seen(snapshot(store, full_p))
    written = rows(store.database, f"SELECT k, v FROM {ledger} ORDER BY k")
    assert written == [{"k": full_p, "v": 7}, {"k": lean_p, "v": 7}]
