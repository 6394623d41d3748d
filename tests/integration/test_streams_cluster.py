"""Durable streams under real faults, on a dedicated 3-node cluster: readers attached
before, during and after the writes each see every value once, in order, while the
writing worker process is killed (SIGKILL: another takes over once its lease lapses) and
then the cluster's leader is killed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from raftflow import Client, Status
from tests.apps import streams as app
from tests.integration.workers import WorkerProcess, rotated_url
from tests.support import wait_until

APP = "tests.apps.streams:engine"
N = 60
pytestmark = pytest.mark.slow


def test_readers_see_every_value_once_in_order_through_a_worker_kill_and_a_leader_kill(
    tmp_path: Path, rqlite_cluster_factory: Callable[..., Any]
) -> None:
    cluster = rqlite_cluster_factory(3)
    urls = cluster.urls
    app.engine.connect(rotated_url(urls, 0))
    readers: dict[str, list[Any]] = {}
    failures: list[BaseException] = []
    threads: list[threading.Thread] = []

    def attach(name: str, shift: int) -> None:
        def read() -> None:
            try:
                with Client.from_url(rotated_url(urls, shift)) as client:
                    readers[name] = list(client.read_stream(handle.id, app.KEY))
            except BaseException as exc:  # reported below
                failures.append(exc)

        thread = threading.Thread(target=read, name=f"reader-{name}")
        thread.start()
        threads.append(thread)

    def written() -> int:
        return sum(1 for s in handle.steps() if s.kind == "stream")

    first = WorkerProcess(APP, rotated_url(urls, 1), tmp_path / "first.log", lease=2)
    second: WorkerProcess | None = None
    try:
        handle = app.engine.start(app.produce, N)
        attach("before", 0)  # before the first value
        app.engine.send(handle.id, None, topic="start")
        wait_until(lambda: written() >= 10, timeout=30)
        attach("during", 1)
        second = WorkerProcess(APP, rotated_url(urls, 2), tmp_path / "second.log", lease=2)
        first.kill()  # SIGKILL, mid-writes: the second worker goes on once the lease lapses
        first.process.wait(10)
        before_kill = written()
        wait_until(lambda: written() >= before_kill + 10, timeout=30)
        leader = cluster.leader()
        cluster.kill(leader)  # the writes and the reads go on with the new leader
        assert handle.result(timeout=60) == N
        attach("after", 2)
        for thread in threads:
            thread.join(60)
        assert not failures, failures
        assert all(not t.is_alive() for t in threads)
        calls = [s for s in handle.steps() if s.kind == "stream"]
        assert [c.status for c in calls] == ["succeeded"] * (N + 1)  # the values and the close
        assert len({c.worker_id for c in calls}) == 2  # the killed worker's and its successor's
        assert handle.status() is Status.SUCCEEDED
    finally:
        first.stop()
        if second is not None:
            second.stop()
        app.engine.close()
    expected = list(range(N))
    assert readers == {"before": expected, "during": expected, "after": expected}
