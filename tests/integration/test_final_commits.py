"""The lean final commit (stores/store.sql ``lean_final*``), on the session's 3-node rqlite
cluster and on a SQLite file.

- the same final commit sent lean and full writes the same rows, whatever the trigger
  chain does beside it: a parent woken, a limit's next waiter admitted, a cancel pending, a
  retried step completed in place, a failed outcome;
- a stale lease's lean final commit writes nothing, and says "lease lost";
- a workflow's outcome goes lean end to end (a lone one, a child and its parent, a limited
  one and its waiter), and what follows from it still happens;
- what is left to the full commit (a signal taken, an attempt appended, a cancel, a run
  that goes on or continues as new), and a batch rolled back by an error is sent again
  with its final commits full.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from raftflow.engine.workflow.events import RUN, RUN_TEXT
from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.commit_flow import CommitFlows
from raftflow.stores.flows import QUERIES as STORE
from raftflow.stores.records import Status
from raftflow.stores.store import SqlStore
from raftflow.transports.db.flow import Flow, Request, Statement

from raftflow import Engine
from tests.integration.conftest import NOW
from tests.support import execute, recorded, rows

WORKER = "final-test"


def names(sent: list[Request]) -> list[str]:
    return [statement.name for request in sent for statement in request.statements]


def commit(store: SqlStore, c: Commit, sent: list[Request] | None = None) -> CommitOutcome:
    (outcome,) = store.run(recorded(store.commits.commit([c], 30.0), [] if sent is None else sent))
    return outcome


def leased_start(store: SqlStore, eid: str, token: str, **options: Any) -> int:
    outcome = store.run(
        store.flows.start(eid, "wf", {"n": 1}, 0, RUN, lease_token=token, **options)
    )
    assert outcome.created and outcome.lease_seq is not None
    return outcome.lease_seq


def final(eid: str, seq: int, token: str, **fields: Any) -> Commit:
    values: dict[str, Any] = dict(
        execution_id=eid,
        lease_seq=seq,
        lease_token=token,
        worker_id=WORKER,
        commit_id=f"{eid}:final",
        step_idx=0,
        step_name="s",
        step_status="succeeded",
        step_output="2",
        step_started_at=NOW - 1,
        status=Status.SUCCEEDED,
        output='{"ok":true}',
    )
    values.update(fields)
    return Commit(**values)


# Each scenario sets up the executions of prefix ``p`` and returns the final commit to send.
Scenario = Callable[[SqlStore, str], Commit]


def lone(store: SqlStore, p: str) -> Commit:
    seq = leased_start(store, f"{p}e", f"{p}t")
    return final(f"{p}e", seq, f"{p}t")


def failed(store: SqlStore, p: str) -> Commit:
    seq = leased_start(store, f"{p}e", f"{p}t")
    error = '{"type":"ValueError","message":"no","traceback":""}'
    return final(
        f"{p}e", seq, f"{p}t", step_status="failed", step_output=None, step_error=error,
        status=Status.FAILED, output=None, error=error,
    )  # fmt: skip


def no_step(store: SqlStore, p: str) -> Commit:
    seq = leased_start(store, f"{p}e", f"{p}t")
    return final(f"{p}e", seq, f"{p}t", step_idx=None, step_name=None, step_status=None)


def child(store: SqlStore, p: str) -> Commit:
    """A parent parked on its child (until far away): the child's outcome wakes it."""
    parent_seq = leased_start(store, f"{p}parent", f"{p}pt")
    park = Commit(
        execution_id=f"{p}parent", lease_seq=parent_seq, lease_token=f"{p}pt", worker_id=WORKER,
        commit_id=f"{p}park", step_idx=0, step_name="wf", step_kind="child",
        step_status="succeeded", step_output=f'"{p}parent/0"', step_started_at=NOW - 1,
        status=Status.RUNNING, next_event=RUN_TEXT, park_until=NOW + 3600,
        wake_child=f"{p}parent/0",
    )  # fmt: skip
    assert commit(store, park).applied
    seq = leased_start(store, f"{p}parent/0", f"{p}t", parent_id=f"{p}parent")
    return final(f"{p}parent/0", seq, f"{p}t")


def limited(store: SqlStore, p: str) -> Commit:
    """The one slot of a limit, and a waiter for it: the outcome frees the slot."""
    limit = (f"{p}key", 1)
    store.run(store.flows.start(f"{p}e", "wf", {"n": 1}, 0, RUN, limit=limit))
    # Leased as a claim leases it (the claim itself would take any claimable event).
    execute(
        store.database,
        Statement(
            "test.lease",
            "UPDATE messages SET locked_by = :t, lock_expiry = :x, attempts = 1"
            " WHERE group_id = :id",
            {"t": f"{p}t", "x": NOW + 30, "id": f"{p}e"},
        ),
        Statement(
            "test.running",
            "UPDATE executions SET status = 'running' WHERE id = :id",
            {"id": f"{p}e"},
        ),
    )
    store.run(store.flows.start(f"{p}w", "wf", {"n": 2}, 0, RUN, limit=limit))
    (waiter,) = rows(store.database, "SELECT admitted FROM executions WHERE id = ?", f"{p}w")
    assert waiter["admitted"] == 0
    (seq,) = rows(store.database, "SELECT seq FROM messages WHERE group_id = ?", f"{p}e")
    return final(f"{p}e", seq["seq"], f"{p}t")


def cancel_pending(store: SqlStore, p: str) -> Commit:
    seq = leased_start(store, f"{p}e", f"{p}t")
    assert store.run(store.flows.cancel(f"{p}e", "stop")) is Status.RUNNING
    return final(f"{p}e", seq, f"{p}t")


def retried(store: SqlStore, p: str) -> Commit:
    """A step recorded as retrying (its first attempt failed) completes with the outcome."""
    seq = leased_start(store, f"{p}e", f"{p}t")
    attempt = '{"attempt":1,"type":"E","message":"m","started_at":1,"ended_at":2}'
    retrying = Commit(
        execution_id=f"{p}e", lease_seq=seq, lease_token=f"{p}t", worker_id=WORKER,
        commit_id=f"{p}retry", step_idx=0, step_name="s", step_status="retrying",
        step_error='{"type":"E","message":"m","traceback":""}', step_started_at=NOW - 2,
        step_wake_at=NOW - 1, step_attempt=attempt, status=Status.RUNNING,
        next_event=RUN_TEXT, next_token=f"{p}t",
    )  # fmt: skip
    outcome = commit(store, retrying)
    assert outcome.applied and outcome.next_seq is not None
    return final(f"{p}e", outcome.next_seq, f"{p}t", step_attempts=2)


SCENARIOS = [lone, failed, no_step, child, limited, cancel_pending, retried]


def snapshot(store: SqlStore, p: str) -> dict[str, list[dict[str, Any]]]:
    """Every row of prefix ``p``'s executions, the prefix replaced (message seqs left out)."""
    like = f"{p}%"
    queries = {
        "executions": "SELECT * FROM executions WHERE id LIKE ? ORDER BY id",
        "steps": "SELECT * FROM steps WHERE execution_id LIKE ? ORDER BY execution_id, idx",
        "messages": "SELECT * FROM messages WHERE group_id LIKE ? ORDER BY seq",
        "groups": "SELECT * FROM groups WHERE group_id LIKE ? ORDER BY group_id",
    }
    tables = {table: rows(store.database, sql, like) for table, sql in queries.items()}
    for row in tables["messages"]:
        del row["seq"]
    for row in tables["executions"]:
        if row["status"] == "pending":
            del row["commit_id"]  # a start's own (random) commit id
    return {
        table: [
            {k: v.replace(p, "P:") if isinstance(v, str) else v for k, v in row.items()}
            for row in found
        ]
        for table, found in tables.items()
    }


#: The scenarios whose execution has a parent or a limit: the unlinked form refuses them.
LINKED = (child, limited)


@pytest.mark.parametrize("unlinked", [False, True], ids=["update", "unlinked"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_lean_final_writes_what_the_full_commit_writes(
    store: SqlStore, scenario: Scenario, unlinked: bool
) -> None:
    run = uuid.uuid4().hex[:6]
    lean_prefix, full_prefix = f"{run}-lean-", f"{run}-full-"
    before = {p: snapshot(store, p) for p in (lean_prefix, full_prefix)}
    lean = replace(scenario(store, lean_prefix), unlinked=unlinked)
    full = replace(scenario(store, full_prefix), full=True)
    assert before[lean_prefix] == before[full_prefix] == {t: [] for t in before[lean_prefix]}
    assert lean.lean_final and not full.lean_final
    sent: list[Request] = []
    assert commit(store, lean, sent) == CommitOutcome(True)
    first = "store.lean_final_unlinked" if unlinked else "store.lean_final"
    assert names(sent[:1]) == [first, "store.lean_final_step", "store.lean_final_ack"]
    assert sent[0].transaction  # one request, one transaction, one Raft entry
    if unlinked and scenario in LINKED:
        # The statement found a parent or a limit: nothing acked, so the commit was read
        # back (still held) and sent in full -- the trigger chain did what it must.
        assert names(sent[1:]) == ["store.final_outcome", "store.commit", "store.commit_outcome"]
    else:
        assert len(sent) == 1
    sent = []
    assert commit(store, full, sent).applied
    assert names(sent) == ["store.commit", "store.commit_outcome"]
    lean_rows, full_rows = snapshot(store, lean_prefix), snapshot(store, full_prefix)
    assert lean_rows == full_rows
    committed = lean.execution_id.replace(lean_prefix, "P:")
    (execution,) = [e for e in lean_rows["executions"] if e["id"] == committed]
    assert execution["commit_id"] == f"{committed}:final"
    assert execution["status"] in ("succeeded", "failed")
    assert execution["completed_at"] == NOW
    if scenario is child:  # the parent's parked event woke with the child's outcome
        (message,) = lean_rows["messages"]
        assert message["group_id"] == "P:parent" and message["lock_expiry"] == NOW
    if scenario is limited:  # the waiter holds the freed slot, and is claimable
        (waiter,) = [e for e in lean_rows["executions"] if e["id"] == "P:w"]
        assert waiter["admitted"] == 1
        (group,) = lean_rows["groups"]
        assert group["group_id"] == "P:w" and group["ready_at"] < NOW
    if scenario is cancel_pending:
        assert execution["cancel_reason"] == "stop" and execution["status"] == "succeeded"


def test_a_stale_lease_lean_final_writes_nothing(store: SqlStore) -> None:
    p = uuid.uuid4().hex[:6] + "-"
    stale = lone(store, p)
    # The lease lapsed and another worker took the event over.
    execute(
        store.database,
        Statement(
            "test.takeover",
            "UPDATE messages SET locked_by = 'other', lock_expiry = :x WHERE seq = :seq",
            {"x": NOW + 30, "seq": stale.lease_seq},
        ),
    )
    before = snapshot(store, p)
    sent: list[Request] = []
    outcome = commit(store, stale, sent)
    assert outcome == CommitOutcome(False, error="lease lost")
    assert names(sent)[:3] == ["store.lean_final", "store.lean_final_step", "store.lean_final_ack"]
    assert "store.commit" not in names(sent)  # no full commit tried after it
    assert snapshot(store, p) == before
    assert before["executions"][0]["status"] == "running" and before["steps"] == []


def test_an_applied_lean_final_sent_again_reads_as_applied(store: SqlStore) -> None:
    """An ambiguous retry: the first attempt applied (the event is gone); the second is
    fenced, and the execution's commit id says it was this commit."""
    p = uuid.uuid4().hex[:6] + "-"
    once = lone(store, p)
    assert commit(store, once) == CommitOutcome(True)
    after = snapshot(store, p)
    assert commit(store, once) == CommitOutcome(True)
    assert snapshot(store, p) == after


def test_several_lean_finals_in_one_batch(store: SqlStore) -> None:
    p = uuid.uuid4().hex[:6] + "-"
    good = [lone(store, f"{p}{i}-") for i in range(3)]
    stale = replace(lone(store, f"{p}s-"), lease_token="not-the-lease")
    sent: list[Request] = []
    outcomes = store.run(recorded(store.commits.commit([*good, stale], 30.0), sent))
    assert outcomes == [CommitOutcome(True)] * 3 + [CommitOutcome(False, error="lease lost")]
    assert len(sent) == 2  # the batch, then the strong read of the one it did not decide
    for i in range(3):
        (row,) = rows(store.database, "SELECT status FROM executions WHERE id = ?", f"{p}{i}-e")
        assert row["status"] == "succeeded"
    (row,) = rows(store.database, "SELECT status FROM executions WHERE id = ?", f"{p}s-e")
    assert row["status"] == "running"


# ---------------------------------------------------------------- end to end


@pytest.fixture
def engine(url: str | list[str]) -> Iterator[Engine]:
    engine = Engine.from_url(url, auto_migrate=True)
    yield engine
    engine.close()


@pytest.fixture
def final_statements(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(execution id, first statement) of every commit request that carried an outcome."""
    seen: list[tuple[str, str]] = []
    original = CommitFlows.commit

    def spied(self: CommitFlows, commits: Any, visibility: float) -> Flow[Any]:
        sent: list[Request] = []
        outcomes = yield from recorded(original(self, commits, visibility), sent)
        for c in commits:
            if c.status is not None and c.status.is_final:
                seen.append(
                    (
                        c.execution_id,
                        "unlinked"
                        if "store.lean_final_unlinked" in names(sent)
                        else "lean"
                        if c.lean_final
                        and {"store.lean_final", "store.lean_finals"} & set(names(sent))
                        else "full",
                    )
                )
        return outcomes

    monkeypatch.setattr(CommitFlows, "commit", spied)
    return seen


def test_workflows_end_with_a_lean_final_commit(
    engine: Engine, final_statements: list[tuple[str, str]]
) -> None:
    calls: list[str] = []

    @engine.step
    def double(n: int) -> int:
        return n * 2

    @engine.workflow(name="lone")
    def lone_wf(n: int) -> int:
        return double(n)

    @engine.workflow(name="kid")
    def kid(n: int) -> int:
        return double(n) + 1

    @engine.workflow(name="parent")
    def parent(n: int) -> int:
        return int(engine.start(kid, n).result()) + 100

    @engine.workflow(name="limited", concurrency=1)
    def limited_wf(n: int) -> int:
        calls.append(f"start {n}")
        time.sleep(0.2)
        calls.append(f"end {n}")
        return double(n)

    with engine.running_worker(concurrency=4):
        alone = engine.start(lone_wf, 5)
        assert alone.result(timeout=30) == 10
        top = engine.start(parent, 1)
        assert top.result(timeout=30) == 103
        first, second = engine.start(limited_wf, 1), engine.start(limited_wf, 2)
        assert first.result(timeout=30) == 2 and second.result(timeout=30) == 4
    assert calls in (
        ["start 1", "end 1", "start 2", "end 2"],
        ["start 2", "end 2", "start 1", "end 1"],
    )
    kinds = dict(final_statements)
    assert len(kinds) == 5, final_statements
    # No parent and no limit: the unlinked form; a child or a limited one: the UPDATE.
    assert kinds.pop(alone.id) == kinds.pop(top.id) == "unlinked"
    assert set(kinds.values()) == {"lean"}, final_statements


@pytest.mark.parametrize(
    "shape",
    [
        {"consume_signal": 3},  # the last call took a signal: the trigger marks it read
        {"step_attempt": '{"attempt":1}'},  # a failed attempt appended to a history
        {"status": Status.CANCELLED},  # a cancel: the full commit, as before
        {"status": Status.RUNNING, "next_event": RUN_TEXT},  # the run goes on
        {"continue_input": "{}"},  # continue_as_new
        {"full": True},  # sent again after a rolled-back batch
    ],
    ids=["signal", "attempt", "cancelled", "running", "continue", "forced"],
)
def test_what_the_lean_final_commit_leaves_to_the_full_one(shape: dict[str, Any]) -> None:
    assert final("e", 1, "t").lean_final
    assert not replace(final("e", 1, "t"), **shape).lean_final


def test_a_batch_that_fails_is_sent_again_with_its_finals_full(store: SqlStore) -> None:
    """A statement error rolls the transactional batch back as a whole: sent again, its
    final commits full, only the culprit fails."""
    p = uuid.uuid4().hex[:6] + "-"
    good = lone(store, f"{p}g-")
    seq = leased_start(store, f"{p}b-e", f"{p}b-t")
    # A record without a name: the steps table refuses it (NOT NULL).
    bad = Commit(
        execution_id=f"{p}b-e", lease_seq=seq, lease_token=f"{p}b-t", worker_id=WORKER,
        step_idx=0, step_name=None, step_status="succeeded", step_started_at=NOW,
        status=Status.RUNNING, next_event=RUN_TEXT, full=True,
    )  # fmt: skip
    sent: list[Request] = []
    outcomes = store.run(recorded(store.commits.commit([good, bad], 30.0), sent))
    assert outcomes[0] == CommitOutcome(True)
    assert not outcomes[1].applied and outcomes[1].error and "NOT NULL" in outcomes[1].error
    assert sent[0].transaction and names(sent)[0] == "store.lean_final"
    again = names(sent[1:])  # the batch again, then one by one: all of it full commits
    assert "store.commit" in again and not [n for n in again if "lean_final" in n]
    (row,) = rows(store.database, "SELECT status FROM executions WHERE id = ?", f"{p}g-e")
    assert row["status"] == "succeeded"
    (row,) = rows(store.database, "SELECT status FROM executions WHERE id = ?", f"{p}b-e")
    assert row["status"] == "running"


def test_the_unlinked_form_knows_every_column_and_trigger_of_executions(
    store: SqlStore,
) -> None:
    """``lean_final_unlinked`` and ``mark_claimed_running`` rewrite the whole row and skip
    the status triggers: a migration that adds a column or a trigger to ``executions``
    must be reflected there (this fails until it is)."""
    table = [row["name"] for row in rows(store.database, "PRAGMA table_info(executions)")]
    for name in ("lean_final_unlinked", "mark_claimed_running"):
        sql = STORE(name, {}).sql
        listed = sql[sql.index("(") + 1 : sql.index(")")].replace("\n", " ")
        assert [column.strip() for column in listed.split(",")] == ["rowid", *table]
    triggers = rows(
        store.database,
        "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'executions'"
        " ORDER BY name",
    )
    assert [t["name"] for t in triggers] == [
        "child_finished_elsewhere",  # UPDATE OF status: only an execution with a parent
        "execution_admitted",  # UPDATE OF admitted: not a column the final commit sets
        "execution_finished",  # UPDATE OF status: a parent to wake, children to cancel
        "execution_limit_cancelled",  # UPDATE OF cancel_reason: not set by the commit
        "execution_limit_freed",  # UPDATE OF status: a limit's slot
        "execution_limit_resumed",  # UPDATE OF status: a limit's slot, on resume
        "parent_cancelled_elsewhere",  # UPDATE OF status to cancelled: never a lean final
    ]
