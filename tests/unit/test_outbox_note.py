"""A child on another cluster than its parent, and the parent's cancel (sharded): the
parent's note of the child is fenced by the parent's lease (a worker whose lease was taken
over notes nothing, and so starts nothing), and a cancel that reaches the child's cluster
before the child's start writes the child cancelled there (a stalled worker of the parent
may still send the start). Both found by the simulator's sharded seed 3766."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from raftflow.engine.runtime.relay import Relay
from raftflow.stores import outbox
from raftflow.stores.commit import Commit
from raftflow.stores.records import Status
from raftflow.stores.rows import cancelled_error
from raftflow.stores.store import SqlStore
from raftflow.transports.contract import Lease
from raftflow.transports.transport import SqlTransport


def test_a_worker_whose_lease_was_taken_over_notes_no_child(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'parent.db'}"
    transport, store = SqlTransport.from_url(url), SqlStore.from_url(url)
    store.share(transport)
    try:
        store.start("p", "parent", None, event={"kind": "run"})
        stale = transport.claim("w1", visibility=0.1)
        time.sleep(0.2)  # its lease lapses; another worker takes the parent over
        live = transport.claim("w2", visibility=30)
        assert stale is not None and live is not None and live.seq == stale.seq

        def note(lease: Lease, child: str) -> bool:
            return store.run(outbox.note_child(store.clock, "p", child, "kid", lease))

        assert note(stale, "p-c1") is False
        assert note(live, "p-c2") is True
        assert note(live, "p-c2") is True  # again (a retried call): the note is there
        with sqlite3.connect(tmp_path / "parent.db") as db:
            assert db.execute("SELECT id FROM remote_children").fetchall() == [("p-c2",)]
    finally:
        transport.close()
        store.close()


def test_a_cancel_relayed_before_the_childs_start_makes_that_start_find_it_cancelled(
    tmp_path: Path,
) -> None:
    """The parent noted its child elsewhere, was cancelled, and its cancel reached the
    child's cluster before the child's start (a stalled worker of the parent sends it
    later): the relay writes the child cancelled there, so the late start runs nothing."""
    urls = [f"sqlite:///{tmp_path / name}" for name in ("parent.db", "child.db")]
    (parent_queue, parent), (_, child) = (
        (SqlTransport.from_url(url), SqlStore.from_url(url)) for url in urls
    )
    parent.share(parent_queue)

    async def relay() -> int:
        here, there = parent.to_async(), child.to_async()
        try:
            worker = SimpleNamespace(worker_id="w1")
            duty = Relay(worker, here, lambda _id: there, interval=60.0)  # type: ignore[arg-type]
            return await duty.relay()
        finally:
            await here.close()
            await there.close()

    try:
        parent.start("p", "parent", None, event={"kind": "run"})
        lease = parent_queue.claim("w1", visibility=30)
        assert lease is not None
        assert parent.run(outbox.note_child(parent.clock, "p", "p-c1", "kid", lease))
        parent.run(parent.flows.cancel("p"))  # a running parent: its worker commits it...
        commit = Commit(
            execution_id="p",
            lease_seq=lease.seq,
            lease_token=lease.token,
            worker_id="w1",
            status=Status.CANCELLED,
            error=cancelled_error("cancelled"),
        )
        [outcome] = asyncio.run(_commit(parent, parent_queue, commit))
        assert outcome.applied
        assert asyncio.run(relay()) == 1  # ...and the news goes to the child's cluster
        late = child.start("p-c1", "kid", None, event={"kind": "run"})  # the stalled start
        assert not late.created and late.record.status is Status.CANCELLED
    finally:
        for component in (parent_queue, parent, child):
            component.close()


async def _commit(store: SqlStore, transport: SqlTransport, commit: Commit) -> list[Any]:
    aqueue = transport.to_async()
    astore = store.to_async(aqueue)
    try:
        return await astore.commit([commit], 30)
    finally:
        await astore.close()
