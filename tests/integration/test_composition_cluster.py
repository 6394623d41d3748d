"""The composition on the session's 3-node rqlite cluster: an engine built by hand on an
RqliteTransport and an RqliteStore runs workflows through a worker, on one connection."""

from __future__ import annotations

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
