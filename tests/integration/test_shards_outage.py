"""One cluster of a sharded deployment down does not stop a worker on the others: two
real rqlite clusters (one node each), the second stopped before the worker starts (or
before the process opens the deployment). The worker serves the first cluster while the
second is down, then the second's executions once its node is back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, UnavailableError


def define(engine: Engine) -> Any:
    @engine.step
    def double(n: int) -> int:
        return 2 * n

    @engine.workflow
    def job(n: int) -> int:
        return double(n) + double(n)

    return job


def ids_by_cluster(engine: Engine) -> dict[str, list[str]]:
    """Execution ids that route to each cluster, in the order of its URL."""
    return {
        shard.name: [
            i for i in (f"job-{n}" for n in range(200)) if engine.shards.of(i).name == shard.name
        ]
        for shard in engine.shards
    }


def test_a_worker_serves_the_clusters_it_reaches_while_one_is_down(
    rqlite_cluster_factory: Callable[..., LocalCluster],
) -> None:
    """Before, when the second cluster's clock was due a sync, its run failed its first
    request (the sync) and the worker stopped on every cluster."""
    first, second = rqlite_cluster_factory(1), rqlite_cluster_factory(1)
    engine = Engine.from_url(f"{first.url};{second.url}", retry_timeout=3.0)
    try:
        job = define(engine)
        up, down = ids_by_cluster(engine).values()
        # Started while both are up, run by no worker yet: they wait on the second cluster.
        waiting = [engine.start(job, n, execution_id=i) for n, i in enumerate(down[:3])]
        (node,) = second.nodes
        second.stop_node(node)
        # As 30 s after its last request there: the worker's first one must sync its clock.
        clock = engine.shards.shards[1].store.clock
        clock._synced_at = float("-inf")  # type: ignore[attr-defined]
        with engine.running_worker(concurrency=4, retry_delay=0.2):
            reached = [engine.start(job, n, execution_id=i) for n, i in enumerate(up[:3])]
            assert [h.result(timeout=60) for h in reached] == [0, 4, 8]
            second.start_node(node)
            assert [h.result(timeout=60) for h in waiting] == [0, 4, 8]
            assert engine.start(job, 5, execution_id=down[3]).result(timeout=60) == 20
    finally:
        engine.close()


def test_a_process_opens_the_deployment_while_one_cluster_is_down(
    rqlite_cluster_factory: Callable[..., LocalCluster],
) -> None:
    """Before, opening the deployment's URL failed while any of its clusters was down, so
    a worker (re)started during one cluster's outage served none. Now the silent cluster
    is opened unchecked, taken to be the one cluster name the catalog assigns partitions
    to that no answering cluster has, and checked (identity, schema) when it answers."""
    first, second = rqlite_cluster_factory(1), rqlite_cluster_factory(1)
    url = f"{first.url};{second.url}"
    creator = Engine.from_url(url)
    names = [shard.name for shard in creator.shards]
    up, down = ids_by_cluster(creator).values()
    job = define(creator)
    waiting = [creator.start(job, n, execution_id=i) for n, i in enumerate(down[:3])]
    creator.close()
    (node,) = second.nodes
    second.stop_node(node)

    engine = Engine.from_url(url, connect_timeout=1.0, retry_timeout=3.0)
    try:
        assert [shard.name for shard in engine.shards] == names  # the silent one placed
        job = define(engine)
        with engine.running_worker(concurrency=4, retry_delay=0.2):
            reached = [engine.start(job, n, execution_id=i) for n, i in enumerate(up[:3])]
            assert [h.result(timeout=60) for h in reached] == [0, 4, 8]
            with pytest.raises(UnavailableError):  # its cluster is down: refused, not lost
                engine.start(job, 9, execution_id=down[5])
            second.start_node(node)
            assert [engine.get(h.id).result(timeout=60) for h in waiting] == [0, 4, 8]
            assert engine.start(job, 5, execution_id=down[3]).result(timeout=60) == 20
    finally:
        engine.close()
