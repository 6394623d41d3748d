"""The outbox of a sharded deployment under kill -9 of the workers that relay it.

Two real rqlite clusters, two ``raftflow worker`` processes serving both, parents whose
children live on the other cluster (tests/apps/families.py): a child's outcome reaches its
parent only through the outbox, relayed by a worker of the child's cluster. The workers
are killed (kill -9) and replaced again and again while children finish, so relays die
between applying news and deleting it: every parent still gets every child's result,
once, and the outboxes end empty.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from tests.apps import families
from tests.chaos.db import Db
from tests.integration.workers import WorkerProcess

pytestmark = pytest.mark.chaos

ClusterFactory = Callable[..., LocalCluster]
APP = "tests.apps.families:engine"
PARENTS = 12
CHILDREN = 3


def test_children_elsewhere_reach_their_parents_through_kill_9_of_the_relays(
    rqlite_cluster_factory: ClusterFactory, tmp_path: Path
) -> None:
    a, b = rqlite_cluster_factory(1), rqlite_cluster_factory(1)
    url = f"{a.urls[0]};{b.urls[0]}"
    engine = families.engine
    engine.connect(url)
    shards = engine.shards
    dbs = [Db(a.urls), Db(b.urls)]
    workers: list[WorkerProcess] = []

    def worker(n: int) -> WorkerProcess:
        process = WorkerProcess(APP, url, tmp_path / f"worker-{n}.log", lease=3)
        workers.append(process)
        return process

    def elsewhere(parent_id: str, n: int) -> str:
        home = shards.of(parent_id)
        return next(
            f"kid-{parent_id}-{n}-{i}"
            for i in range(200)
            if shards.of(f"kid-{parent_id}-{n}-{i}") is not home
        )

    try:
        live = [worker(0), worker(1)]
        handles = []
        for p in range(PARENTS):
            parent_id = f"fam-{p}"
            kids = [elsewhere(parent_id, n) for n in range(CHILDREN)]
            handles.append(
                engine.start(families.parent, {"children": kids}, execution_id=parent_id)
            )
        deadline = time.monotonic() + 120
        round_ = 2
        while not all(h.status().is_final for h in handles):
            assert time.monotonic() < deadline, [(h.id, h.status()) for h in handles]
            time.sleep(1.0)
            victim = live.pop(0)
            victim.kill(signal.SIGKILL)  # a relay may die between its two writes
            live.append(worker(round_))
            round_ += 1
        assert [h.result(timeout=5) for h in handles] == [families.expected(CHILDREN)] * PARENTS
        for db in dbs:
            assert db.query("SELECT * FROM outbox") == []
        notes = [r for db in dbs for r in db.query("SELECT status FROM remote_children")]
        assert len(notes) == PARENTS * CHILDREN
        assert {r["status"] for r in notes} == {"succeeded"}
        # A family takes at least 1.8 s (three children in turn, two 0.3 s steps each): the
        # first kill, at 1 s, always comes while they run; later ones depend on the machine.
        assert round_ > 2
    finally:
        for process in workers:
            process.stop()
        engine.close()
