"""The embedded backend shared by several worker processes: one SQLite file, real
``raftflow worker`` processes contending for its write lock (each runs its requests on its
loop while the lock is free, and waits in a thread when another process holds it), and
the same claims as on rqlite: each step once, in order, one at a time."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from raftflow import Engine
from tests.apps import ordering
from tests.apps.ordering import Spec, assert_ran_in_order_across_processes
from tests.integration.workers import WorkerProcess
from tests.support import wait_until

APP = "tests.apps.ordering:engine"


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    ordering.engine.connect(url)
    yield url
    ordering.engine.close()


def test_worker_processes_share_one_sqlite_file(url: str, tmp_path: Path) -> None:
    engine: Engine = ordering.engine
    specs = [Spec(log_dir=str(tmp_path), steps=5, sleep=0.001 * (i % 3)) for i in range(40)]
    started = [
        WorkerProcess(APP, url, tmp_path / f"worker-{i}.log", concurrency=8) for i in range(3)
    ]
    try:
        # All three contend from the first start (and each has its signal handlers).
        wait_until(lambda: all(" started (" in w.output() for w in started), timeout=60)
        handles = [engine.start(ordering.sequence, spec) for spec in specs]
        results = [handle.result(timeout=120) for handle in handles]
    finally:
        codes = [worker.stop() for worker in started]
    assert codes == [0, 0, 0], [w.output()[-2000:] for w in started]
    assert results == [ordering.expected(spec) for spec in specs]
    assert_ran_in_order_across_processes(engine, handles, str(tmp_path), steps=5)
    assert "database is locked" not in "".join(w.output() for w in started)
