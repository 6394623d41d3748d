"""The durable primitives under real faults: worker processes killed with SIGKILL while
executions sleep, wait for a message, wait for a child, and wait between two attempts of
a retried step; and cancels of parents with running and sleeping children, and cancels
racing with an execution's last step."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, Status, WorkflowCancelledError
from tests.apps import durable
from tests.apps.durable import Plan, read_runs
from tests.integration.workers import rotated_url, workers
from tests.support import wait_until

APP = "tests.apps.durable:engine"
pytestmark = pytest.mark.slow


@pytest.fixture
def engine(cluster: LocalCluster) -> Iterator[Engine]:
    durable.engine.connect(rotated_url(cluster.urls, 0))
    yield durable.engine
    durable.engine.close()


def kinds(handle: Any) -> list[tuple[str, str]]:
    return [(s.kind, s.status) for s in handle.steps()]


def test_a_killed_worker_loses_no_wait_and_reruns_no_completed_step(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    plan = Plan(log_dir=str(tmp_path), sleep=4.0, fail_times=1)
    with workers(APP, cluster.urls, 1, tmp_path / "first", concurrency=8) as (first,):
        nap = engine.start(durable.napper, plan)
        listen = engine.start(durable.listener, plan)
        parent = engine.start(durable.parent, plan)
        retry = engine.start(durable.flaky, plan)
        # Everyone is waiting: asleep, on a recv, on the child (asleep), between attempts.
        wait_until(lambda: ("sleep", "succeeded") in kinds(nap), timeout=30)
        wait_until(lambda: ("recv", "waiting") in kinds(listen), timeout=30)
        wait_until(lambda: ("wait", "waiting") in kinds(parent), timeout=30)
        # The child's first step must be recorded too: a step that ran but whose commit
        # the kill cut off is rightly run again (at least once), not a re-run of a
        # completed step.
        child = engine.get(f"{parent.id}/1")
        wait_until(lambda: ("sleep", "succeeded") in kinds(child), timeout=30)
        wait_until(lambda: ("step", "retrying") in kinds(retry), timeout=30)
        first.kill()  # SIGKILL
        first.process.wait(10)
    engine.send(listen.id, {"hello": "while no worker was alive"}, topic=plan.topic)
    with workers(APP, cluster.urls, 1, tmp_path / "second", concurrency=8):
        assert nap.result(timeout=60) == "after"
        assert listen.result(timeout=60) == {"hello": "while no worker was alive"}
        assert parent.result(timeout=60) == "child said after"
        assert retry.result(timeout=60) == 2

    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in read_runs(str(tmp_path)):
        runs[run["execution"]].append(run)
    for handle in (nap, listen, parent, child):
        labels = [r["index"] for r in runs[handle.id]]
        assert len(labels) == len(set(labels)), f"a completed step ran again: {runs[handle.id]}"
    # The sleep ended no earlier than its recorded wake time.
    (sleep,) = [s for s in nap.steps() if s.kind == "sleep"]
    after = next(r for r in runs[nap.id] if r["label"] == "after")
    assert sleep.wake_at is not None and after["at"] >= sleep.wake_at - 0.05
    # The retry resumed at attempt 2, after its 2 s delay, not at attempt 1 again.
    attempts = [(r["attempt"], r["failing"]) for r in runs[retry.id]]
    assert attempts == [(1, True), (2, False)]
    assert runs[retry.id][1]["at"] - runs[retry.id][0]["at"] >= 2.0 - 0.05


def test_cancel_of_a_parent_cancels_its_running_and_sleeping_children(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    plan = Plan(log_dir=str(tmp_path), sleep=600.0)
    with workers(APP, cluster.urls, 2, tmp_path, concurrency=4):
        parents = [engine.start(durable.parent, plan) for _ in range(3)]
        for handle in parents:
            wait_until(lambda h=handle: ("wait", "waiting") in kinds(h), timeout=30)
        started = time.monotonic()
        for handle in parents:
            assert handle.cancel() is Status.RUNNING
        for handle in parents:
            with pytest.raises(WorkflowCancelledError):
                handle.result(timeout=30)
            (child,) = handle.children()
            with pytest.raises(WorkflowCancelledError, match="parent was cancelled"):
                engine.get(child.id).result(timeout=30)
        assert time.monotonic() - started < 300  # not the 600 s sleep
    labels = [r["label"] for r in read_runs(str(tmp_path))]
    assert "after" not in labels and not any(lbl.startswith("child said") for lbl in labels)


def test_a_cancel_racing_the_last_step_leaves_exactly_one_outcome(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    plan = Plan(log_dir=str(tmp_path), sleep=0.0)
    with workers(APP, cluster.urls, 2, tmp_path, concurrency=8):
        handles, seen = [], []
        for i in range(40):  # each cancelled from 0 to 195 ms after its start
            handles.append(engine.start(durable.napper, plan))
            time.sleep(0.005 * (i % 40))
            seen.append(handles[-1].cancel())
        outcomes = []
        for handle in handles:
            try:
                outcomes.append(("succeeded", handle.result(timeout=60)))
            except WorkflowCancelledError:
                outcomes.append(("cancelled", None))
    for handle, (status, value) in zip(handles, outcomes):
        record = handle.info()
        assert record.status.value == status  # result() and the record agree
        if status == "succeeded":
            assert value == "after" and record.error is None
        else:
            assert record.output is None and record.error is not None
            assert [s.name for s in handle.steps() if s.kind == "step"] in ([], ["mark"])
    # Both outcomes happened: the race was real.
    assert {s for s, _ in outcomes} == {"succeeded", "cancelled"}, (seen, outcomes)
