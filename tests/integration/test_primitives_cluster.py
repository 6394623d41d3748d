"""The durable primitives on the shared 3-node rqlite cluster: the same test bodies as on
SQLite (``tests/unit/test_primitives.py``), with an engine on the cluster instead."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine
from tests.unit.test_primitives import *  # noqa: F403  (the bodies run again, here)

pytestmark = pytest.mark.slow


@pytest.fixture
def engine(cluster: LocalCluster) -> Iterator[Engine]:  # replaces the SQLite one
    engine = Engine.from_url(cluster.url)
    yield engine
    engine.close()
