"""The composition on the session's 3-node rqlite cluster: an engine built by hand on an
RqliteTransport and an RqliteStore runs workflows through a worker, on one connection."""

from __future__ import annotations

import httpx
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, RqliteStore, RqliteTransport
from tests.support import clear_tables


def test_an_engine_of_an_rqlite_transport_and_store_runs_workflows(
    rqlite_cluster: LocalCluster,
) -> None:
    clear_tables(rqlite_cluster.url)
    urls = rqlite_cluster.urls
    transport, store = RqliteTransport.from_url(urls), RqliteStore.from_url(urls)
    engine = Engine(transport=transport, store=store)
    try:
        assert store.database is transport.database  # the store shares the transport's

        @engine.step
        def add(a: int, b: int) -> int:
            return a + b

        @engine.workflow
        def total(values: list[int]) -> int:
            sum_ = 0
            for value in values:
                sum_ = add(sum_, value)
            return sum_

        handles = [engine.start(total, list(range(n))) for n in range(1, 6)]
        with engine.running_worker(concurrency=4):
            assert [h.result(timeout=60) for h in handles] == [0, 1, 3, 6, 10]
        assert sum(len(h.steps()) for h in handles) == 15
        assert transport.stats().messages == 0
    finally:
        engine.close()


def test_a_queue_and_a_state_on_two_rqlite_clusters_run_workflows(
    rqlite_cluster: LocalCluster, rqlite_node: LocalCluster
) -> None:
    """The split pair (stores/split.py) on rqlite: the queue on one node, the state on
    the 3-node cluster; the commit on the state's cluster, then the ack on the queue's."""
    clear_tables(rqlite_cluster.url)
    clear_tables(rqlite_node.url)
    transport = RqliteTransport.from_url(rqlite_node.url)
    store = RqliteStore.from_url(rqlite_cluster.urls)
    engine = Engine(transport=transport, store=store)
    try:
        assert store.database is not transport.database

        @engine.step
        def mul(a: int, b: int) -> int:
            return a * b

        @engine.workflow
        def product(values: list[int]) -> int:
            result = 1
            for value in values:
                result = mul(result, value)
            engine.sleep(1.1)  # parked in the state's cluster, then relayed to the queue
            return result

        handles = [engine.start(product, list(range(1, n + 1))) for n in range(1, 6)]
        with engine.running_worker(concurrency=4):
            assert [h.result(timeout=60) for h in handles] == [1, 2, 6, 24, 120]
        assert sum(len(h.steps()) for h in handles) == 15 + 5
        assert transport.stats().messages == 0
        assert len(store.list(limit=10)) == 5
        queue_side = httpx.get(
            f"{rqlite_node.url}/db/query", params={"q": "SELECT COUNT(*) FROM executions"}
        )
        assert queue_side.json()["results"][0]["values"] == [[0]]  # no state on the queue's
    finally:
        engine.close()
