"""A parent's note of its child on another cluster is fenced by the parent's lease
(stores/outbox.sql ``note_child``): a worker whose lease lapsed, and which another worker
took over, notes nothing -- and so starts nothing elsewhere, where a cancel of the parent
would never reach it (found by the simulator's sharded seed 3766)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from raftflow.stores import outbox
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
