"""asyncio.gather over child workflows on the shared 3-node cluster, with a worker
restarted while the parent's gather is part-way through its waits: the new worker
replays the parent from its records and meets every call at its recorded position."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine
from tests.apps import gather
from tests.apps.gather import Fan
from tests.integration.workers import rotated_url, workers
from tests.support import wait_until

APP = "tests.apps.gather:engine"
CHILDREN = 20
pytestmark = pytest.mark.slow


@pytest.fixture
def engine(cluster: LocalCluster) -> Iterator[Engine]:
    gather.engine.connect(rotated_url(cluster.urls, 0))
    yield gather.engine
    gather.engine.close()


def calls(handle: Any) -> list[tuple[str, str, str]]:
    return [(s.kind, s.name, s.status) for s in handle.steps()]


def test_gather_over_children_survives_a_worker_restart(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    handle = engine.start(gather.fan_in, Fan(log_dir=str(tmp_path), children=CHILDREN))
    children = [f"{handle.id}/{i}" for i in range(CHILDREN)]
    starts = [("child", "member", "succeeded")] * CHILDREN
    waits = [("wait", child, "succeeded") for child in children]
    with workers(APP, cluster.urls, 1, tmp_path / "first", concurrency=8) as (first,):
        wait_until(lambda: calls(handle)[:CHILDREN] == starts, timeout=60)
        for child in children[: CHILDREN // 2]:
            engine.send(child, "go", topic="go")
        # Part-way: some waits recorded, the parent parked on the next one.
        wait_until(lambda: calls(handle)[CHILDREN : CHILDREN + 5] == waits[:5], timeout=60)
        first.stop()  # drains: the parent's run in memory is given up
    for child in children[CHILDREN // 2 :]:
        engine.send(child, "go", topic="go")
    with workers(APP, cluster.urls, 1, tmp_path / "second", concurrency=8):
        assert handle.result(timeout=120) == [2 * i for i in range(CHILDREN)]
    assert calls(handle) == starts + waits
    runs = Counter(str(line["execution"]) for line in gather.reports(str(tmp_path)))
    assert runs == Counter({child: 1 for child in children})  # each child's step ran once
