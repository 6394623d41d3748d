"""The ``raftflow`` command on a sharded deployment of two real rqlite clusters (one node
each) with a ``raftflow worker`` process serving both: ``migrate`` migrates each,
``list``, ``queue``, ``workers``, ``schedules`` and ``shards`` see both clusters, ``get``
and ``send`` reach an execution on the second, and no command prints the URL's password."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.workflow.schedule import SCHEDULE_PREFIX
from raftflow.transports.db.schema import LATEST
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Client
from tests.integration.test_cli import APP, raftflow
from tests.integration.workers import WorkerProcess
from tests.support import wait_until

SECRET = "s3cret-Passw0rd"
ORDER = {"id": "o", "amount": 3.5}


def ok_json(*args: str, url: str) -> Any:
    done = raftflow(*args, "--json", url=url)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert SECRET not in done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def url(rqlite_cluster_factory: Callable[..., LocalCluster]) -> str:
    """Two one-node clusters, listed with credentials (rqlite without an auth file
    ignores them): what a command prints must mask them."""
    first, second = rqlite_cluster_factory(1), rqlite_cluster_factory(1)
    return ";".join(
        cluster.url.replace("://", f"://operator:{SECRET}@", 1) for cluster in (first, second)
    )


@pytest.fixture
def worker(url: str, tmp_path: Path) -> Iterator[WorkerProcess]:
    migrated = ok_json("migrate", url=url)["clusters"]
    assert [c["version"] for c in migrated] == [LATEST, LATEST]
    assert all(c["url"].startswith("http://***@127.0.0.1:") for c in migrated)
    process = WorkerProcess(APP, url, tmp_path / "worker.log", worker_id="w-both")
    try:
        yield process
    finally:
        process.stop()


def test_the_commands_see_both_clusters(url: str, worker: WorkerProcess) -> None:
    def beaten() -> Any:  # each run of the worker beats on its own cluster
        found = ok_json("workers", url=url)
        return found if found and len(found[0]["clusters"]) == 2 else None

    workers = wait_until(beaten, timeout=60)
    assert [(w["worker_id"], w["clusters"]) for w in workers] == [
        ("w-both", ["shard-1", "shard-2"])
    ]
    with Client.from_url(url) as client:
        route = client.shards.of
        done = [client.start("checkout", ORDER, execution_id=f"o{i}") for i in range(6)]
        waiting = {
            name: next(f"a{i}" for i in range(40) if route(f"a{i}").name == name)
            for name in ("shard-1", "shard-2")
        }
        for execution_id in waiting.values():
            client.start("approval", ORDER, execution_id=execution_id)
        for handle in done:
            handle.result(timeout=60)
        placed = {handle.id: route(handle.id).name for handle in done}
    assert set(placed.values()) == {"shard-1", "shard-2"}

    listed = ok_json("list", url=url)
    assert {r["id"]: r["cluster"] for r in listed if r["workflow"] == "checkout"} == placed
    far = waiting["shard-2"]
    assert ok_json("get", far, url=url)["cluster"] == "shard-2"

    def both_parked() -> Any:
        queue = ok_json("queue", "--per-cluster", url=url)
        lanes = [q for q in queue["queues"] if q["workflow"] == "approval"]
        return queue if lanes and lanes[0]["groups"] == 2 and queue["parked"] == 2 else None

    queue = wait_until(both_parked, timeout=60)
    (lane,) = [q for q in queue["queues"] if q["workflow"] == "approval"]
    assert (lane["workers"], lane["serving"]) == (1, ["w-both"])
    assert [(c["cluster"], c["parked"]) for c in queue["clusters"]] == [
        ("shard-1", 1),
        ("shard-2", 1),
    ]

    (nightly,) = ok_json("schedules", url=url)
    with Client.from_url(url) as client:
        assert nightly["cluster"] == client.shards.of(SCHEDULE_PREFIX + "nightly").name

    shards = ok_json("shards", url=url)
    assert (shards["sharded"], shards["epoch"]) == (True, 1)
    assert [c["name"] for c in shards["clusters"]] == ["shard-1", "shard-2"]
    assert sum(c["partitions"] for c in shards["clusters"]) == shards["partitions"]
    for cluster in shards["clusters"]:
        assert cluster["url"].startswith("http://***@127.0.0.1:")
        mine = [i for i, name in placed.items() if name == cluster["name"]]
        assert cluster["executions"]["succeeded"] == len(mine)
        assert cluster["executions"]["running"] + cluster["executions"]["pending"] == 1
    text = raftflow("shards", url=url)
    assert "2 clusters" in text.stdout and SECRET not in text.stdout + text.stderr

    sent = raftflow("send", far, '{"ok": false}', "--topic", "review", url=url)
    assert sent.returncode == 0, sent.stderr
    assert ok_json("result", far, "--timeout", "60", url=url)["output"] == "rejected"
