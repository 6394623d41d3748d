"""Every sync/async pair behaves alike: the same public methods with the same signatures,
and the same answers to the same calls (run here on SQLite; tests/integration runs the
transport and store twins on a real rqlite cluster)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.client.async_client import AsyncClient
from raftflow.stores.rqlite import AsyncRqliteStore, RqliteStore
from raftflow.stores.store import AsyncSqlStore, SqlStore
from raftflow.transports.db.database import AsyncDatabase, Database
from raftflow.transports.rqlite import AsyncRqliteTransport, RqliteTransport
from raftflow.transports.rqlite.client import AsyncRqliteConnection, RqliteConnection
from raftflow.transports.transport import AsyncSqlTransport, SqlTransport

from raftflow import Client

PAIRS = [
    (SqlTransport, AsyncSqlTransport),
    (RqliteTransport, AsyncRqliteTransport),
    (SqlStore, AsyncSqlStore),
    (RqliteStore, AsyncRqliteStore),
    (Database, AsyncDatabase),
    (RqliteConnection, AsyncRqliteConnection),
    (Client, AsyncClient),
]
#: Only the sync side makes its twin (on the connection its transport's twin shares);
#: only the sync rqlite side can speak ``requests``; ``store_of`` gives a sync store.
SYNC_ONLY = {"to_async", "share", "store_of", "__enter__", "__exit__"}
SYNC_ONLY_PARAMETERS = {"http"}


def public(cls: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") or name in ("__enter__", "__exit__")
    }


@pytest.mark.parametrize("sync, twin", PAIRS, ids=[s.__name__ for s, _ in PAIRS])
def test_the_async_twin_has_every_method_with_the_same_signature(sync: type, twin: type) -> None:
    theirs = public(twin)
    for name, member in public(sync).items():
        if name in SYNC_ONLY or isinstance(member, property):
            continue
        assert name in theirs, f"{twin.__name__} has no {name}"
        if not callable(member):
            continue
        other = theirs[name]
        awaited = inspect.iscoroutinefunction(other) or inspect.isasyncgenfunction(other)
        assert awaited, f"{twin.__name__}.{name} is not async"
        ours = [
            (p.name, p.kind, p.default)
            for p in inspect.signature(member).parameters.values()
            if p.name not in SYNC_ONLY_PARAMETERS
        ]
        twins = [(p.name, p.kind, p.default) for p in inspect.signature(other).parameters.values()]
        assert ours == twins, f"{sync.__name__}.{name} and {twin.__name__}.{name} differ"


Script = Callable[[Any], list[Any]]


def transport_script(t: Any) -> list[Any]:
    t.publish("g1", {"n": 1})
    t.publish("g1", {"n": 2}, priority=3, key="k")
    t.publish("g1", {"n": 2}, key="k")  # deduplicated
    t.publish("g2", "x")
    seen: list[Any] = [t.stats(), t.claimable()]
    lease = t.claim("w", 30)
    seen.append((lease.group_id, lease.event, lease.attempts))
    t.nack(lease, 0)
    lease = t.claim("w", 30)
    lease = t.extend(lease, 60)
    t.ack(lease)
    many = t.claim_many("w", 30, 5)
    seen.append(sorted((le.group_id, str(le.event)) for le in many))
    seen.append(t.stats())
    return seen


def store_script(s: Any) -> list[Any]:
    first = s.start("e1", "wf", {"a": 1}, event={"kind": "run"}, priority=2)
    again = s.start("e1", "wf", {"a": 2}, event={"kind": "run"})
    record = s.get("e1")
    return [
        first.created,
        again.created,
        (record.workflow, record.input, record.status, record.priority),
        s.get("missing"),
        [r.id for r in s.list(limit=5)],
        s.steps("e1"),
        s.counts(),
    ]


@pytest.mark.parametrize(
    "make, script",
    [(SqlTransport, transport_script), (SqlStore, store_script)],
    ids=["transport", "store"],
)
def test_the_twins_give_the_same_answers(tmp_path: Path, make: type, script: Script) -> None:
    sync = make.from_url(f"sqlite:///{tmp_path / 'sync.db'}")
    try:
        expected = script(sync)
    finally:
        sync.close()

    async def run_twin() -> list[Any]:
        opened = await _async_twin_of(make).from_url(f"sqlite:///{tmp_path / 'twin.db'}")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(None, script, _Blocking(opened, loop))
        finally:
            await opened.close()

    assert asyncio.run(run_twin()) == expected


def _async_twin_of(cls: type) -> type:
    return {SqlTransport: AsyncSqlTransport, SqlStore: AsyncSqlStore}[cls]


class _Blocking:
    """Calls an async twin's methods from a thread, waiting for each on its loop."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target, self._loop = target, loop

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._target, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self._loop)
            return future.result(30)

        return call


@pytest.mark.parametrize("make", [SqlTransport, SqlStore], ids=["transport", "store"])
def test_closing_a_sqlite_twin_leaves_the_shared_connection_open(
    tmp_path: Path, make: type
) -> None:
    sync = make.from_url(f"sqlite:///{tmp_path / 'shared.db'}")
    try:
        twin = sync.to_async()
        asyncio.run(twin.close())
        assert sync.database.run(_one())  # still usable
    finally:
        sync.close()


def _one() -> Any:
    from raftflow.transports.db.flow import Request, Statement

    response = yield Request((Statement("one", "SELECT 1 AS one"),))
    return response.raise_for_errors()[0].first()
