"""A worker's lease length (``raftflow worker --lease``) on a real 3-node cluster: the
executions of a worker killed with SIGKILL are taken over by another one once the leases
lapse, and every step's side effect happened once, in the worker that recorded the step.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine
from tests.apps import ordering
from tests.apps.ordering import Spec
from tests.integration.workers import rotated_url, workers
from tests.support import wait_until

APP = "tests.apps.ordering:engine"
LEASE = 2.0
EXECUTIONS = 6


@pytest.fixture
def engine(cluster: LocalCluster) -> Iterator[Engine]:
    ordering.engine.connect(rotated_url(cluster.urls, 0))
    yield ordering.engine
    ordering.engine.close()


def lease_deadlines(cluster: LocalCluster, worker_id: str) -> list[float]:
    """The deadlines of the leases ``worker_id`` holds (its tokens are ``worker_id:...``)."""
    response = httpx.post(
        f"{cluster.url}/db/query?level=strong",
        json=[["SELECT lock_expiry FROM messages WHERE locked_by LIKE ?", f"{worker_id}:%"]],
        timeout=30,
    )
    response.raise_for_status()
    return [row[0] for row in response.json()["results"][0].get("values", [])]


def test_a_killed_workers_executions_finish_elsewhere_each_step_once(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    # Step 1 blocks for a minute on its first run: the worker holding it is killed mid-step.
    spec = Spec(log_dir=str(tmp_path), steps=3, block_at=1, block_for=60)
    with workers(
        APP, cluster.urls, 1, tmp_path / "a", concurrency=8, lease=LEASE, worker_id="doomed"
    ) as (doomed,):
        handles = [engine.start(ordering.sequence, spec) for _ in range(EXECUTIONS)]
        markers = [tmp_path / f"blocked-{h.id}" for h in handles]
        wait_until(lambda: all(m.exists() for m in markers), timeout=60)
        wait_until(lambda: all(m.read_text() for m in markers), timeout=5)
        assert {int(m.read_text()) for m in markers} == {doomed.pid}
        # The deadlines it wrote are a lease of LEASE seconds, not the 30 s default (the
        # nodes run on this machine's clock; 1 s of slack for the clock's estimate).
        deadlines = lease_deadlines(cluster, "doomed")
        assert len(deadlines) == EXECUTIONS
        assert max(deadlines) <= time.time() + LEASE + 1.0, deadlines
        with workers(
            APP, cluster.urls, 1, tmp_path / "b", concurrency=8, lease=LEASE, worker_id="heir"
        ) as (heir,):
            doomed.kill(signal.SIGKILL)
            results = [handle.result(timeout=60) for handle in handles]

    assert results == [ordering.expected(spec)] * EXECUTIONS
    runs = ordering.runs_by_execution(str(tmp_path))
    pids = {"doomed": doomed.pid, "heir": heir.pid}
    for handle in handles:
        records = handle.steps()
        # Step 0 committed before the kill; the interrupted step 1 and step 2 in the heir.
        assert [(s.idx, s.worker_id) for s in records] == [(0, "doomed"), (1, "heir"), (2, "heir")]
        # One side effect per step (the killed run of step 1 ended in the kill, before its
        # line), by the process that recorded the step.
        seen = Counter((run["index"], run["pid"]) for run in runs[handle.id])
        assert seen == Counter((s.idx, pids[s.worker_id]) for s in records), seen
    stats = engine.transport.stats()
    assert (stats.messages, stats.leased) == (0, 0)
