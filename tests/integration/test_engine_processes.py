"""The engine on a real 3-node rqlite cluster with real worker processes and real faults.

Workers are ``raftflow worker tests.apps.ordering:engine`` processes, each entering the
cluster through a different node. Steps log every run (execution, index, start, end, pid),
and the tests check the claims the engine makes from those logs and the store.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, Status
from tests.apps import ordering
from tests.apps.ordering import (
    Spec,
    assert_ran_in_order_across_processes,
    assert_serial,
    runs_by_execution,
)
from tests.integration.workers import rotated_url, workers
from tests.support import wait_until

APP = "tests.apps.ordering:engine"


@pytest.fixture
def engine(cluster: LocalCluster) -> Iterator[Engine]:
    ordering.engine.connect(rotated_url(cluster.urls, 0))
    yield ordering.engine
    ordering.engine.close()


def _recorded_pid(worker_id: str) -> int:
    return int(worker_id.split(":")[1])


def test_steps_run_in_order_one_at_a_time_across_processes(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    specs = [Spec(log_dir=str(tmp_path), steps=5, sleep=0.002 * (i % 5)) for i in range(30)]
    with workers(APP, cluster.urls, 3, tmp_path, concurrency=4):
        handles = [engine.start(ordering.sequence, spec) for spec in specs]
        results = [handle.result(timeout=120) for handle in handles]

    assert results == [ordering.expected(spec) for spec in specs]
    assert_ran_in_order_across_processes(engine, handles, str(tmp_path), steps=5)


def test_async_workflows_run_in_worker_processes(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    specs = [Spec(log_dir=str(tmp_path), steps=4) for _ in range(10)]
    with workers(APP, cluster.urls, 2, tmp_path, concurrency=4):
        handles = [engine.start(ordering.asequence, spec) for spec in specs]
        assert [h.result(timeout=60) for h in handles] == [ordering.expected(s) for s in specs]
    runs = runs_by_execution(str(tmp_path))
    for handle in handles:
        assert [r["index"] for r in runs[handle.id]] == [0, 1, 2, 3]
        assert_serial(runs[handle.id])


def test_worker_killed_mid_step_execution_resumes_elsewhere(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    spec = Spec(log_dir=str(tmp_path), steps=5, block_at=2, block_for=60)
    with workers(APP, cluster.urls, 2, tmp_path, concurrency=2, visibility=2) as procs:
        handle = engine.start(ordering.sequence, spec)
        marker = tmp_path / f"blocked-{handle.id}"
        wait_until(marker.exists, timeout=30)
        blocked_pid = int(wait_until(marker.read_text, timeout=5))
        victim = next(p for p in procs if p.pid == blocked_pid)
        victim.kill(signal.SIGKILL)
        assert handle.result(timeout=60) == ordering.expected(spec)

    runs = runs_by_execution(str(tmp_path))[handle.id]
    # Steps 0 and 1 completed before the kill: they never ran again. Step 2 was running
    # in the killed worker: it ran (to completion) once more, elsewhere.
    assert [r["index"] for r in runs] == [0, 1, 2, 3, 4]
    assert all(r["pid"] != blocked_pid for r in runs if r["index"] >= 2)
    records = handle.steps()
    assert [s.idx for s in records] == [0, 1, 2, 3, 4]
    assert all(_recorded_pid(s.worker_id) != blocked_pid for s in records[2:])


def test_stalled_worker_is_fenced_when_it_wakes(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    """SIGSTOP a worker mid-step for longer than its lease: another worker takes over and
    finishes; when the stalled one wakes, its result is refused (fencing)."""
    spec = Spec(log_dir=str(tmp_path), steps=4, block_at=1, block_for=1.0)
    with workers(APP, cluster.urls, 2, tmp_path, concurrency=2, visibility=2) as procs:
        handle = engine.start(ordering.sequence, spec)
        marker = tmp_path / f"blocked-{handle.id}"
        wait_until(marker.exists, timeout=30)
        stalled_pid = int(wait_until(marker.read_text, timeout=5))
        stalled = next(p for p in procs if p.pid == stalled_pid)
        stalled.kill(signal.SIGSTOP)
        try:
            assert handle.result(timeout=60) == ordering.expected(spec)
        finally:
            stalled.kill(signal.SIGCONT)
        # Give the woken worker time to finish its step and try (and fail) to commit it.
        wait_until(
            lambda: any(
                r["pid"] == stalled_pid and r["index"] == 1
                for r in ordering.read_logs(str(tmp_path))
            ),
            timeout=30,
        )
        time.sleep(1.0)
        records = handle.steps()

    assert [s.idx for s in records] == [0, 1, 2, 3]
    assert _recorded_pid(records[1].worker_id) != stalled_pid  # the stale result lost
    info = handle.info()
    assert info.status is Status.SUCCEEDED and info.steps_done == 4
    runs = runs_by_execution(str(tmp_path))[handle.id]
    assert_serial(runs, excused_pids={stalled_pid})


def test_heartbeat_keeps_a_long_step_with_its_worker(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    spec = Spec(log_dir=str(tmp_path), steps=2, block_at=0, block_for=5.0)
    with workers(APP, cluster.urls, 2, tmp_path, concurrency=2, visibility=1.5):
        handle = engine.start(ordering.sequence, spec)
        assert handle.result(timeout=60) == ordering.expected(spec)
    runs = runs_by_execution(str(tmp_path))[handle.id]
    assert [r["index"] for r in runs] == [0, 1]  # the 5 s step was not taken over


def test_sigterm_drains_and_hands_over_without_waiting_for_the_lease(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    spec = Spec(log_dir=str(tmp_path), steps=3, block_at=1, block_for=1.0)
    with workers(APP, cluster.urls, 2, tmp_path, concurrency=2, visibility=60) as procs:
        handle = engine.start(ordering.sequence, spec)
        marker = tmp_path / f"blocked-{handle.id}"
        wait_until(marker.exists, timeout=30)
        draining = next(p for p in procs if p.pid == int(wait_until(marker.read_text)))
        started = time.monotonic()
        draining.kill(signal.SIGTERM)
        # Step 1 finishes in the draining worker, which then releases the execution: the
        # other worker goes on at once, long before the 60 s lease would have lapsed.
        assert handle.result(timeout=50) == ordering.expected(spec)
        assert time.monotonic() - started < 50
        assert draining.process.wait(timeout=20) == 0
    runs = runs_by_execution(str(tmp_path))[handle.id]
    assert [r["index"] for r in runs] == [0, 1, 2]
    assert runs[1]["pid"] == draining.pid and runs[2]["pid"] != draining.pid


@pytest.mark.slow
def test_leader_killed_mid_run_every_execution_completes(
    rqlite_cluster_factory: Any, tmp_path: Path
) -> None:
    cluster = rqlite_cluster_factory(3)
    ordering.engine.connect(rotated_url(cluster.urls, 0))
    try:
        specs = [Spec(log_dir=str(tmp_path), steps=5, sleep=0.01) for _ in range(20)]
        with workers(APP, cluster.urls, 2, tmp_path, concurrency=4, visibility=5):
            handles = [ordering.engine.start(ordering.sequence, spec) for spec in specs]
            wait_until(lambda: len(ordering.read_logs(str(tmp_path))) >= 20, timeout=30)
            leader = cluster.leader()
            cluster.kill(leader)
            time.sleep(1.0)
            cluster.start_node(leader)
            results = [handle.result(timeout=120) for handle in handles]
        assert results == [ordering.expected(spec) for spec in specs]
        runs = runs_by_execution(str(tmp_path))
        for handle in handles:
            assert [s.idx for s in handle.steps()] == [0, 1, 2, 3, 4]
            # Every step ran; one may have run twice if its commit's fate was unknown.
            assert sorted({r["index"] for r in runs[handle.id]}) == [0, 1, 2, 3, 4]
        stats = ordering.engine.transport.stats()
        assert (stats.messages, stats.leased) == (0, 0)
    finally:
        ordering.engine.close()
        os.sync()
