"""Fixtures shared by every suite. The rqlite fixtures (rqlite_cluster, rqlite_node,
rqlite_cluster_factory) come from the raftflow_rqlite pytest plugin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import LoopThread


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    """One background event loop for the session: async twins are driven on it."""
    loop = LoopThread()
    yield loop
    loop.close()
