"""A rolling upgrade on the shared 3-node cluster ("Queues and safe deploys"): version-1
workers have executions mid-flight (sleeping, waiting for a signal); a version-2 worker
starts, new executions run on it; a version-1 worker is killed (kill -9) in the middle;
the version-1 executions all finish on version-1 code, `raftflow versions` shows version 1
drained, and its last worker stops. Version 2's code calls one more step before the wait:
had any version-1 history been replayed by it, that execution would fail with a
NonDeterminismError."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, Status
from tests.apps import upgrade_v1, upgrade_v2
from tests.integration.workers import ROOT, WorkerProcess, rotated_url
from tests.support import wait_until

V1, V2 = "tests.apps.upgrade_v1:engine", "tests.apps.upgrade_v2:engine"


@pytest.fixture
def engines(cluster: LocalCluster) -> Iterator[tuple[Engine, Engine]]:
    upgrade_v1.engine.connect(rotated_url(cluster.urls, 0))
    upgrade_v2.engine.connect(rotated_url(cluster.urls, 1))
    yield upgrade_v1.engine, upgrade_v2.engine
    upgrade_v1.engine.close()
    upgrade_v2.engine.close()


def versions(url: str) -> dict[str, dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "raftflow", "versions", "--url", url, "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return {row["version"]: row for row in json.loads(out)}


def test_a_rolling_upgrade_runs_each_execution_on_the_code_that_started_it(
    engines: tuple[Engine, Engine], cluster: LocalCluster, tmp_path: Path
) -> None:
    v1, v2 = engines
    assert v1.version != v2.version  # the workflow's source changed: a new version
    url = rotated_url(cluster.urls, 2)

    def worker(app: str, name: str, i: int) -> WorkerProcess:
        return WorkerProcess(
            app, rotated_url(cluster.urls, i), tmp_path / f"{name}.log", worker_id=name, lease=2
        )

    old = [worker(V1, "v1-a", 0), worker(V1, "v1-b", 1)]
    new: list[WorkerProcess] = []
    try:
        sleepers = [v1.start(upgrade_v1.order, upgrade_v1.Order(n=i, sleep=4)) for i in range(5)]
        waiters = [v1.start(upgrade_v1.order, upgrade_v1.Order(n=i)) for i in range(5, 10)]
        for handle in sleepers + waiters:  # mid-flight: prepared, then parked
            wait_until(lambda h=handle: len(h.steps()) >= 2, timeout=60)
        new.append(worker(V2, "v2-a", 2))
        fresh = [v2.start(upgrade_v2.order, upgrade_v2.Order(n=i, sleep=0.5)) for i in range(3)]
        for handle in waiters:
            v1.send(handle.id, "go", topic="go")
        old[0].kill(signal.SIGKILL)  # in the middle of the upgrade, its turns in flight
        results = {h.id: h.result(timeout=60) for h in sleepers + waiters + fresh}
        seen = versions(url)
        assert seen[v1.version]["in_flight"] == 0  # version 1 drained: its workers may go
        assert seen[v1.version]["workers"] >= 1  # the one still running (and the killed one
        # until its last beat is a minute old)
        assert seen[v2.version]["workers"] == 1
        assert old[1].stop() == 0
    finally:
        for process in old + new:
            process.stop()
    for handle in sleepers + waiters:  # version 1's code: no stock check
        assert handle.status() is Status.SUCCEEDED
        assert [s.name for s in handle.steps() if s.kind == "step"] == ["prepare", "ship"]
        assert {s.worker_id for s in handle.steps()} <= {"v1-a", "v1-b"}
        assert results[handle.id][1].startswith("shipped")
    for handle in fresh:  # version 2's
        steps = [s.name for s in handle.steps() if s.kind == "step"]
        assert steps == ["prepare", "check_stock", "ship"]
        assert {s.worker_id for s in handle.steps()} == {"v2-a"}
