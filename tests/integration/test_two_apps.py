"""Two apps on one 3-node cluster, one worker process each: every execution is leased
only to the worker of its own app (read from the database while they run), finishes
within seconds of its own work, and no worker logs an error ("Queues and safe deploys")."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine
from tests.apps import two_apps
from tests.integration.workers import WorkerProcess, rotated_url
from tests.support import wait_until

EACH = 20
WORKERS = {"orders-worker": "orders", "shipping-worker": "shipping"}
APP_OF_WORKFLOW = {"approval": "orders", "dispatch": "shipping"}

#: The leases held now, with the workflow of each leased execution.
LEASES = """
SELECT m.locked_by, e.workflow FROM messages AS m JOIN executions AS e ON e.id = m.group_id
WHERE m.locked_by IS NOT NULL AND m.locked_by <> '__parked__'
"""


@pytest.fixture
def apps(cluster: LocalCluster) -> Iterator[tuple[Engine, Engine]]:
    two_apps.orders.connect(rotated_url(cluster.urls, 0))
    two_apps.shipping.connect(rotated_url(cluster.urls, 1))
    yield two_apps.orders, two_apps.shipping
    two_apps.orders.close()
    two_apps.shipping.close()


def watch_leases(url: str, stop: threading.Event, wrong: list[str], seen: list[int]) -> None:
    """Every lease held while the apps run: a worker of the other app holding one is wrong."""
    with httpx.Client(base_url=url, timeout=10) as client:
        while not stop.is_set():
            reply = client.post("/db/query?level=strong&associative", json=[LEASES])
            for row in reply.raise_for_status().json()["results"][0].get("rows", []):
                worker = str(row["locked_by"]).split(":", 1)[0]
                seen[0] += 1
                if WORKERS.get(worker) != APP_OF_WORKFLOW[row["workflow"]]:
                    wrong.append(f"{worker} held an execution of {row['workflow']}")
            stop.wait(0.02)


def test_two_apps_on_one_cluster_each_run_only_their_own(
    apps: tuple[Engine, Engine], cluster: LocalCluster, tmp_path: Path
) -> None:
    orders, shipping = apps
    started = [orders.start(two_apps.approval, n) for n in range(EACH)]
    started += [shipping.start(two_apps.dispatch, n) for n in range(EACH)]
    stop, wrong, seen = threading.Event(), list[str](), [0]
    watcher = threading.Thread(target=watch_leases, args=(cluster.url, stop, wrong, seen))
    watcher.start()
    processes = [
        WorkerProcess(
            f"tests.apps.two_apps:{app}",
            rotated_url(cluster.urls, i),
            tmp_path / f"{worker}.log",
            worker_id=worker,
            concurrency=8,
        )
        for i, (worker, app) in enumerate(WORKERS.items())
    ]
    try:
        for handle in started:  # each waits for its decision, parked
            wait_until(lambda h=handle: any(s.kind == "recv" for s in h.steps()), timeout=60)
        for handle in started:
            engine = orders if handle.info().workflow == "approval" else shipping
            engine.send(handle.id, "yes", topic="decision")
        # Each finishes within seconds of its own work (a wrong lease parks it a minute).
        results = [handle.result(timeout=30) for handle in started]
    finally:
        stop.set()
        watcher.join()
        logs = {p.log_path.name: (p.stop(), p.output()) for p in processes}
    assert not wrong, wrong[:5]
    assert seen[0] > 0  # the watcher saw leases: the check was not vacuous
    for n, (first, decision) in enumerate(results[:EACH]):
        assert first.startswith("orders:") and first.endswith(f":{n}") and decision == "yes"
    for n, (first, decision) in enumerate(results[EACH:]):
        assert first.startswith("shipping:") and first.endswith(f":{n}") and decision == "yes"
    for name, (code, output) in logs.items():
        assert code == 0, (name, output[-2000:])
        assert "ERROR" not in output and "not registered here" not in output, output[-2000:]
