"""A sharded deployment under faults: the leader of one cluster is killed (kill -9) while
the other cluster keeps going, and a worker serving both is killed too.

Two real rqlite clusters (3 nodes, whose leader dies; 1 node, which keeps going), three
``raftflow worker`` processes given both (``--url 'A;B'``), executions started through a
sharded engine. Checked: every invariant of the chaos suite (tests/chaos/invariants.py) on
the two clusters' rows together; every execution's row, records and messages on the
cluster its id routes to and nowhere else, throughout the run (a watcher reads both every
0.1 s); and the other cluster's executions progressing while the killed leader's cluster
elects a new one.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from tests.apps import ordering
from tests.apps.ordering import Spec
from tests.chaos import invariants
from tests.chaos.db import Db, DbError
from tests.chaos.invariants import Started
from tests.integration.workers import WorkerProcess, rotated_url

pytestmark = pytest.mark.chaos

ClusterFactory = Callable[..., LocalCluster]
APP = "tests.apps.ordering:engine"
EXECUTIONS = 40
STEPS = 8


class Both:
    """The chaos suite's plain reads, on every cluster, rows concatenated: each query the
    invariants make is about rows of one execution (or one queue group), which live on one
    cluster, so the union of the clusters' answers is the deployment's."""

    def __init__(self, *dbs: Db) -> None:
        self.dbs = dbs

    def query(self, sql: str, *params: Any, **options: Any) -> list[dict[str, Any]]:
        return [row for db in self.dbs for row in db.query(sql, *params, **options)]


class Placement(threading.Thread):
    """Reads both clusters every 0.1 s: no execution, step or message is ever on a cluster
    its id does not route to."""

    def __init__(self, dbs: dict[str, Db], route: Callable[[str], str]) -> None:
        super().__init__(name="placement", daemon=True)
        self.dbs, self.route = dbs, route
        self.problems: list[str] = []
        self.reads = 0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.1):
            for name, db in self.dbs.items():
                with contextlib.suppress(DbError):  # a cluster without a leader: next round
                    ids = db.query(
                        "SELECT id FROM executions UNION SELECT group_id FROM messages "
                        "UNION SELECT DISTINCT execution_id FROM steps",
                        level="weak",
                        budget=0.5,
                    )
                    self.reads += 1
                    for row in ids:
                        if self.route(row["id"]) != name:
                            self.problems.append(f"{row['id']} is on {name}")


def steps_on(db: Db) -> int:
    rows = db.query("SELECT COUNT(*) AS n FROM steps", level="weak")
    return int(rows[0]["n"])


@contextlib.contextmanager
def worker_processes(urls: list[str], log_dir: Path) -> Iterator[list[WorkerProcess]]:
    log_dir.mkdir(parents=True, exist_ok=True)
    started = [
        WorkerProcess(
            APP, url, log_dir / f"worker-{i}.log", worker_id=f"w{i}", lease=5, concurrency=8
        )
        for i, url in enumerate(urls)
    ]
    try:
        yield started
    finally:
        for worker in started:
            worker.stop()


def test_a_leader_of_one_cluster_dies_and_the_other_cluster_goes_on(
    rqlite_cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    a, b = rqlite_cluster_factory(3), rqlite_cluster_factory(1)
    deployment = f"{rotated_url(a.urls, 0)};{b.urls[0]}"
    logs = tmp_path / "steps"
    logs.mkdir()
    client = ordering.engine  # the app's engine, as the chaos scenarios start with
    client.connect(deployment)
    names = [shard.name for shard in client.shards]
    dbs = {names[0]: Db(a.urls), names[1]: Db(b.urls)}
    placement = Placement(dbs, lambda i: client.shards.of(i).name)
    placement.start()
    started: dict[str, Started] = {}
    worker_urls = [f"{rotated_url(a.urls, i)};{b.urls[0]}" for i in range(3)]
    try:
        with worker_processes(worker_urls, tmp_path / "workers") as workers:
            for i in range(EXECUTIONS):
                workflow = (ordering.sequence, ordering.asequence)[i % 2]
                spec = Spec(log_dir=str(logs), steps=STEPS, sleep=0.02)
                execution_id = f"order-{i}"
                client.start(workflow, spec, execution_id=execution_id)
                started[execution_id] = Started(workflow.__name__, spec)
            on = {name: [i for i in started if client.shards.of(i).name == name] for name in names}
            assert on[names[0]] and on[names[1]], on  # both clusters have work

            deadline = time.monotonic() + 60
            while steps_on(dbs[names[0]]) < 20:
                assert time.monotonic() < deadline, "no progress on the first cluster"
                time.sleep(0.05)
            leader = a.leader()
            before = steps_on(dbs[names[1]])
            a.kill(leader)  # kill -9 the leader of the first cluster
            killed_at = time.monotonic()
            # The other cluster goes on while the first elects a leader.
            while steps_on(dbs[names[1]]) <= before:
                assert time.monotonic() < killed_at + 30, "the other cluster stopped too"
                time.sleep(0.05)
            workers[0].kill(signal.SIGKILL)  # and a worker serving both dies
            a.start_node(leader)
            a.wait_ready()

            deadline = time.monotonic() + 120
            final = ("succeeded", "failed", "cancelled")
            while True:
                rows = Both(*dbs.values()).query("SELECT id, status FROM executions")
                if len(rows) == EXECUTIONS and all(r["status"] in final for r in rows):
                    break
                assert time.monotonic() < deadline, f"stuck: {rows}"
                time.sleep(0.2)
            pids = {f"w{i}": worker.pid for i, worker in enumerate(workers)}
    finally:
        placement.halt.set()
        placement.join()
        client.close()
    tally = invariants.check(
        Both(*dbs.values()),  # type: ignore[arg-type]
        started,
        logs,
        worker_pids=pids,
        excused_pids={workers[0].pid},
    )
    assert tally.executions == EXECUTIONS and tally.steps == EXECUTIONS * STEPS
    assert placement.reads > 0 and placement.problems == []
