"""``engine.replay`` and ``raftflow replay`` on the shared 3-node rqlite cluster: the same
test bodies as on SQLite (``tests/unit/test_replay.py``), the app on the cluster. The
snapshots before and after each replay are strong reads of every table: the queue's
messages and leases, the executions, their steps, the workers."""

from __future__ import annotations

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from tests.unit.test_replay import *  # noqa: F403  (the bodies run again, here)

pytestmark = pytest.mark.slow


@pytest.fixture
def url(cluster: LocalCluster) -> str:  # replaces the SQLite file
    return cluster.url
