"""The statements of a start without a limit or a debounce (stores/store.sql
``start_direct``), on the session's 3-node rqlite cluster and on a SQLite file.

- they leave the rows the start view's trigger leaves for the same start, with its first
  event leased (the start fast path) or not;
- the outcome they return without a read is the execution as stored, and the seq and
  deadline of its leased event;
- an id that exists changes nothing and is read back as not created, while the same
  request sent again (a retry of an applied attempt) is still this start's: created, its
  event leased.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.workflow.events import RUN
from raftflow.stores.flows import QUERIES, start_params
from raftflow.stores.records import StartOutcome
from raftflow.stores.store import SqlStore
from raftflow.transports.db.clock import LocalClock
from raftflow.transports.db.database import open_database
from raftflow.transports.db.flow import Flow, Request, Response
from raftflow.transports.payload import to_json
from raftflow.transports.rqlite.local import LocalCluster
from raftflow.transports.transport import SqlTransport

from tests.support import clear_tables, execute, recorded, rows

NOW = 1_900_000_000.0


@pytest.fixture(params=["rqlite", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    if request.param == "rqlite":
        cluster: LocalCluster = request.getfixturevalue("rqlite_cluster")
        clear_tables(cluster.url)
        url: str | list[str] = cluster.urls
    else:
        url = f"sqlite:///{tmp_path / 'starts.db'}"
    store = SqlStore(open_database(url, clock=LocalClock(time_source=lambda: NOW)))
    store.create_schema(auto_migrate=True)
    yield store
    store.close()


def start(store: SqlStore, eid: str, sent: list[Request], **options: Any) -> StartOutcome:
    flow = store.flows.start(eid, "wf", {"n": 1}, 2, RUN, visibility=30.0, **options)
    return store.run(recorded(flow, sent))


def snapshot(store: SqlStore, eid: str) -> dict[str, list[dict[str, Any]]]:
    """The execution's rows, its id and the start's own random values left out."""
    found = {
        "executions": rows(store.database, "SELECT * FROM executions WHERE id = ?", eid),
        "messages": rows(store.database, "SELECT * FROM messages WHERE group_id = ?", eid),
        "groups": rows(store.database, "SELECT * FROM groups WHERE group_id = ?", eid),
    }
    for table in found.values():
        for row in table:
            for name in ("id", "group_id", "seq", "commit_id", "rowid"):
                row.pop(name, None)
    return found


@pytest.mark.parametrize("leased", [True, False], ids=["leased", "free"])
@pytest.mark.parametrize(
    "options",
    [{}, {"timeout": 60.0}, {"parent_id": "the-parent"}, {"trace_context": '{"t":1}'}],
    ids=["plain", "deadline", "child", "traced"],
)
def test_a_direct_start_writes_what_the_start_view_writes(
    store: SqlStore, options: dict[str, Any], leased: bool
) -> None:
    fast, viewed = f"{uuid.uuid4().hex}-fast", f"{uuid.uuid4().hex}-view"
    sent: list[Request] = []
    token = "token-fast" if leased else None
    outcome = start(store, fast, sent, lease_token=token, **options)
    assert [s.name for r in sent for s in r.statements] == [
        "store.start_direct",
        "store.start_direct_event",
    ]
    assert len(sent) == 1 and sent[0].transaction  # one request, one Raft entry, no read
    deadline = options.get("timeout")
    params = start_params(
        viewed, "wf", to_json({"n": 1}, what="input"), 2, to_json(RUN, what="event"), NOW,
        uuid.uuid4().hex,
        parent_id=options.get("parent_id"),
        deadline=None if deadline is None else NOW + deadline,
        lease_token="token-view" if leased else None,
        lease_expiry=NOW + 30.0 if leased else None,
    )  # fmt: skip
    statements = [QUERIES("start", params)]
    if "trace_context" in options:
        statements.append(
            QUERIES(
                "set_trace_context",
                {"id": viewed, "commit_id": params["commit_id"], **options},
            )
        )
    execute(store.database, *statements)
    fast_rows, view_rows = snapshot(store, fast), snapshot(store, viewed)
    for table in (fast_rows, view_rows):
        (message,) = table["messages"]
        message.pop("locked_by")  # the two tokens
    assert fast_rows == view_rows
    assert fast_rows["executions"][0]["status"] == ("running" if leased else "pending")
    # What the start returned without reading is the execution as stored.
    assert outcome.created
    assert outcome.record == store.run(store.flows.get(fast))
    (message,) = rows(store.database, "SELECT * FROM messages WHERE group_id = ?", fast)
    assert message["locked_by"] == token
    if leased:
        assert outcome.lease_seq == message["seq"]
        assert outcome.lease_expiry == message["lock_expiry"] == NOW + 30.0
    else:
        assert outcome.lease_seq is None and outcome.lease_expiry is None


def test_an_existing_id_is_not_started_again(store: SqlStore) -> None:
    eid = uuid.uuid4().hex
    first = start(store, eid, [])  # not leased: pending
    before = snapshot(store, eid)
    sent: list[Request] = []
    again = start(store, eid, sent, lease_token="token")
    assert not again.created and again.lease_seq is None and again.lease_expiry is None
    assert again.record == first.record == store.run(store.flows.get(eid))
    assert snapshot(store, eid) == before
    assert len(sent) == 2 and sent[1].level == "strong"  # the statements, then the read


def test_the_same_request_sent_again_is_still_this_start(store: SqlStore) -> None:
    """A retry of an applied attempt (its answer lost): the execution is there with this
    start's commit id, so it is read back as created, its event leased to the token."""
    eid = uuid.uuid4().hex
    sent: list[Request] = []
    flow = store.flows.start(eid, "wf", {"n": 1}, 2, RUN, lease_token="token")
    outcome = store.run(recorded(_answer_lost(flow), sent))
    assert [s.name for s in sent[0].statements] == [s.name for s in sent[1].statements]
    assert sent[0] is sent[1]  # the same request, twice
    assert len(sent) == 3 and sent[2].level == "strong"  # then the read
    assert outcome.created
    (message,) = rows(store.database, "SELECT * FROM messages WHERE group_id = ?", eid)
    assert outcome.lease_seq == message["seq"] and message["locked_by"] == "token"
    assert outcome.lease_expiry == message["lock_expiry"]
    assert outcome.record == store.run(store.flows.get(eid))


def _answer_lost(flow: Flow[StartOutcome]) -> Flow[StartOutcome]:
    """``flow``, its first request sent twice: the first answer is lost."""
    request = flow.send(None)  # type: ignore[arg-type]
    yield request
    response: Response = yield request
    while True:
        try:
            request = flow.send(response)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        response = yield request


def test_a_claim_marks_the_execution_running_and_changes_nothing_else(store: SqlStore) -> None:
    """``mark_claimed_running`` writes the row as a REPLACE of itself: the same rowid (the
    FIFO order of a limit's waiters) and every other column as it was."""
    eid = uuid.uuid4().hex
    start(store, eid, [], timeout=60.0, parent_id="the-parent", trace_context='{"t":1}')
    read = "SELECT rowid AS position, * FROM executions WHERE id = ?"
    (before,) = rows(store.database, read, eid)
    assert before["status"] == "pending"
    (claimed,) = store.claim(SqlTransport(store.database), "claimer", 30.0)
    assert claimed.lease.group_id == eid and claimed.execution is not None
    assert claimed.execution.status.value == "running"
    (after,) = rows(store.database, read, eid)
    assert after == {**before, "status": "running", "updated_at": NOW}
