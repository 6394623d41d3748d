"""RqliteStore and AsyncRqliteStore on the shared 3-node cluster: one body, both twins."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from raftflow.stores.records import Status
from raftflow.stores.rqlite import AsyncRqliteStore, RqliteStore
from raftflow.transports.rqlite.local import LocalCluster

from raftflow.errors import InvalidArgumentError
from tests.support import LoopThread, SyncView


@pytest.fixture(params=["sync", "async"])
def store(
    request: pytest.FixtureRequest, cluster: LocalCluster, loop_thread: LoopThread
) -> Iterator[Any]:
    if request.param == "async":
        twin = loop_thread.run(AsyncRqliteStore.from_url(cluster.urls))
        yield SyncView(twin, loop_thread)
        loop_thread.run(twin.close())
    else:
        sync = RqliteStore.from_url(cluster.urls)
        yield sync
        sync.close()


def test_start_is_atomic_and_idempotent(store: Any) -> None:
    first = store.start("e-1", "checkout", {"id": "o1"}, event={"kind": "run"}, priority=2)
    again = store.start("e-1", "other", {"id": "o2"}, event={"kind": "run"})
    assert first.created and not again.created
    assert again.record.workflow == "checkout" and again.record.input == {"id": "o1"}
    record = store.get("e-1")
    assert record.status is Status.PENDING and record.priority == 2
    assert [r.id for r in store.list()] == ["e-1"]
    assert store.counts() == {Status.PENDING: 1}


def test_list_filters_by_status_newest_first(store: Any) -> None:
    for i in range(5):
        store.start(f"e-{i}", "wf", i, event={"kind": "run"})
    assert [r.id for r in store.list(limit=3)] == ["e-4", "e-3", "e-2"]
    assert store.list(status=Status.SUCCEEDED) == []
    assert len(store.list(status=Status.PENDING, limit=10)) == 5
    with pytest.raises(InvalidArgumentError):
        store.list(limit=0)


def test_unknown_and_bad_ids(store: Any) -> None:
    assert store.get("missing") is None
    assert store.steps("missing") == []
    with pytest.raises(InvalidArgumentError):
        store.get("")
    with pytest.raises(InvalidArgumentError):
        store.start("", "wf", 1, event={"kind": "run"})
    with pytest.raises(InvalidArgumentError):
        store.start("e", "wf", float("inf"), event={"kind": "run"})
    assert store.list() == []
