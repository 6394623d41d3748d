"""The integration suite's ``cluster`` fixture, on the shared 3-node container cluster.

Tests imported here from the transport and engine suites (``make_transport``, ``transport``
and ``connect`` come from ``tests/integration/conftest.py``) run unchanged against rqlite in
Docker: each node in its own container on a user-defined network, bound to ``0.0.0.0`` and
advertising its network alias, its HTTP port published on 127.0.0.1.
"""

from __future__ import annotations

import pytest
from raftflow.transports.rqlite.local.containers import RqliteClusterContainers

from tests.support import clear_tables


@pytest.fixture
def cluster(rqlite_cluster_containers: RqliteClusterContainers) -> RqliteClusterContainers:
    """The shared container cluster with raftflow's tables emptied."""
    clear_tables(rqlite_cluster_containers.url)
    return rqlite_cluster_containers
