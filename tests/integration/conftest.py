"""Transports and stores on the session's shared 3-node cluster, tables emptied per test.

``make_transport`` is parametrized over the three ways to talk to rqlite -- the sync
transport on httpx, the sync transport on requests, the async twin (driven through
:class:`~tests.support.SyncView`) -- so one test body covers all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.stores.store import SqlStore
from raftflow.transports.db.clock import LocalClock
from raftflow.transports.db.database import open_database
from raftflow.transports.rqlite import AsyncRqliteTransport, RqliteTransport
from raftflow.transports.rqlite.local import LocalCluster

from tests.support import LoopThread, SyncView, clear_tables

#: Each test of a transport runs on each: sync httpx and the async twin over httpx (the
#: spec's client) are covered by test_transport_failover.py, test_tls.py and
#: test_transport_concurrency.py.
TRANSPORT_KINDS = ["raftflow", "requests", "async"]

#: The time of the ``store`` fixture's clock, which stands still.
NOW = 1_900_000_000.0


@pytest.fixture
def cluster(rqlite_cluster: LocalCluster) -> LocalCluster:
    """The shared cluster with raftflow's tables emptied."""
    clear_tables(rqlite_cluster.url)
    return rqlite_cluster


@pytest.fixture(params=TRANSPORT_KINDS)
def transport_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_transport(connect: Callable[..., Any], cluster: LocalCluster) -> Callable[..., Any]:
    """``make_transport(urls=None, **options)``: a transport of this test's kind on the
    shared cluster (its tables emptied), closed at teardown."""

    def make(urls: Any = None, **options: Any) -> Any:
        return connect(urls or cluster.urls, **options)

    return make


@pytest.fixture
def transport(make_transport: Callable[..., Any]) -> Any:
    return make_transport()


@pytest.fixture
def connect(transport_kind: str, loop_thread: LoopThread) -> Iterator[Callable[..., Any]]:
    """``connect(urls, **options)``: a transport of this test's kind on any cluster (a
    dedicated one from ``rqlite_cluster_factory``), closed at teardown; nothing is
    cleared. Async twins come wrapped in a SyncView."""
    opened: list[Any] = []

    def open_(urls: Any, **options: Any) -> Any:
        if transport_kind == "async":
            twin = loop_thread.run(AsyncRqliteTransport.from_url(urls, **options))
            opened.append(twin)
            return SyncView(twin, loop_thread)
        transport = RqliteTransport.from_url(urls, http=transport_kind, **options)
        opened.append(transport)
        return transport

    yield open_
    for transport in opened:
        if isinstance(transport, AsyncRqliteTransport):
            loop_thread.run(transport.close())
        else:
            transport.close()


# -- commits written by hand (test_final_commits.py, test_commit_encodings.py) ------------


@pytest.fixture(params=["rqlite", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str | list[str]:
    if request.param == "rqlite":
        cluster: LocalCluster = request.getfixturevalue("rqlite_cluster")
        clear_tables(cluster.url)
        return cluster.urls
    return f"sqlite:///{tmp_path / 'commits.db'}"


@pytest.fixture
def store(url: str | list[str]) -> Iterator[SqlStore]:
    """A store whose clock stands still at NOW: two runs of a scenario write the same times."""
    store = SqlStore(open_database(url, clock=LocalClock(time_source=lambda: NOW)))
    store.create_schema(auto_migrate=True)
    yield store
    store.close()
