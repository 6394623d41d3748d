"""pytest fixtures that run real rqlite 8.26.8 clusters (entry point ``raftflow_rqlite``).

Fixtures:

- ``rqlited_path`` (session): the binary. Missing binary: a failure when ``$CI`` is set, a
  skip with the install instruction otherwise (:func:`missing`, which any test can call for
  what it needs: CI must run every test, so there a skip would hide a test that never ran).
- ``rqlite_cluster`` (session): a shared 3-node :class:`LocalCluster` for tests that only read
  and write. Don't kill or pause its nodes: use the factory for that.
- ``rqlite_node`` (session): a shared 1-node cluster.
- ``rqlite_cluster_factory`` (function): ``factory(size=3, **kwargs) -> LocalCluster`` starts a
  dedicated cluster (kwargs as for :class:`LocalCluster`); all of them are stopped at teardown,
  whether the test passed or not.

At session end any rqlited started in this process and still alive is killed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from raftflow.transports.rqlite.local.cluster import LocalCluster
from raftflow.transports.rqlite.local.install import RqliteNotFoundError, find_rqlited
from raftflow.transports.rqlite.local.lifecycle import report_leaks, started_clusters
from raftflow.transports.rqlite.local.processes import kill_all_started

ClusterFactory = Callable[..., LocalCluster]


def in_ci() -> bool:
    """Whether ``$CI`` is set (to anything but empty, 0, false or no)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(message: str) -> NoReturn:
    """What a test needs is missing here (``message`` says what, and how to get it): a
    failure under CI, which must run every test, and a skip with the reason elsewhere."""
    if in_ci():
        pytest.fail(f"CI is set and {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def rqlited_path() -> Path:
    """Path of the rqlited binary; fails under CI and skips elsewhere when it is missing."""
    try:
        return find_rqlited()
    except RqliteNotFoundError as exc:
        missing(f"rqlited is missing: {exc}")


@pytest.fixture(scope="session")
def rqlite_cluster(rqlited_path: Path) -> Iterator[LocalCluster]:
    """A 3-node cluster shared by the whole session (read/write only: don't kill its nodes)."""
    with LocalCluster(3, binary=rqlited_path) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def rqlite_node(rqlited_path: Path) -> Iterator[LocalCluster]:
    """A 1-node cluster shared by the whole session."""
    with LocalCluster(1, binary=rqlited_path) as cluster:
        yield cluster


@pytest.fixture
def rqlite_cluster_factory(rqlited_path: Path) -> Iterator[ClusterFactory]:
    """Start dedicated clusters (``factory(size=3, **kwargs)``); all stopped at teardown."""

    def make(size: int = 3, **kwargs: Any) -> LocalCluster:
        kwargs.setdefault("binary", rqlited_path)
        return LocalCluster(size, **kwargs)

    with started_clusters(make) as factory:
        yield factory


@pytest.hookimpl(trylast=True)  # after the session fixtures' own teardown
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Safety net: kill every rqlited this test process started that is still alive."""
    leaked = kill_all_started()
    if leaked:
        message = f"raftflow_rqlite: killed {len(leaked)} leaked rqlited process(es): {leaked}"
        report_leaks(session, message)
