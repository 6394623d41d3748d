"""The queue on one SQLite file, the state on another, through real worker processes killed
with SIGKILL (stores/split.py): once in the window between the pair's two writes (the
commit applied in the store, its event not yet acked in the queue), once at random in a
run. Another worker takes over from what the store recorded."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from raftflow.stores.store import SqlStore
from raftflow.transports.transport import SqlTransport

from raftflow import Client
from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = "steps_around_a_park"


class Pair:
    def __init__(self, tmp_path: Path) -> None:
        self.queue, self.state, self.logs = (
            tmp_path / "queue.db",
            tmp_path / "state.db",
            tmp_path / "logs",
        )
        self.logs.mkdir()
        self.tmp_path = tmp_path
        self.workers: list[subprocess.Popen[bytes]] = []
        self.client = Client(
            SqlTransport.from_url(f"sqlite:///{self.queue}"),
            SqlStore.from_url(f"sqlite:///{self.state}"),
        )

    def worker(self, *, crash: bool = False) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "SPLIT_QUEUE": f"sqlite:///{self.queue}",
            "SPLIT_STATE": f"sqlite:///{self.state}",
            "SPLIT_CRASH": "1" if crash else "0",
            "PYTHONUNBUFFERED": "1",
        }
        log = open(self.tmp_path / f"worker-{len(self.workers)}.log", "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.apps.split_pair"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()  # the child has its own copy
        self.workers.append(process)
        return process

    def runs(self, execution_id: str, index: int) -> list[str]:
        path = self.logs / f"{execution_id}-{index}"
        return path.read_text().split() if path.exists() else []

    def count(self, path: Path, table: str) -> int:
        with sqlite3.connect(path) as db:
            return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def close(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.client.close()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    pair = Pair(tmp_path)
    yield pair
    pair.close()


def test_a_worker_killed_between_the_commit_and_the_ack_loses_nothing(pair: Pair) -> None:
    crashing = pair.worker(crash=True)
    handle = pair.client.start(WORKFLOW, str(pair.logs))
    # It records the first step and the park, then kills itself before the queue's ack.
    assert crashing.wait(60) == -signal.SIGKILL
    assert [s.name for s in handle.steps()] == ["logged", "sleep"]
    pair.worker()
    assert handle.result(timeout=60) == [0, 10, 20]
    # Each step ran once: the event delivered again found the first one recorded.
    assert [len(pair.runs(handle.id, i)) for i in range(3)] == [1, 1, 1]
    assert pair.runs(handle.id, 0) == [str(crashing.pid)]
    # The extra event (the redelivered one beside the park's) was handled and is gone.
    wait_until(lambda: pair.count(pair.queue, "messages") == 0, timeout=30)
    assert pair.count(pair.state, "messages") == 0
    assert pair.count(pair.queue, "executions") == 0


def test_a_worker_killed_mid_run_is_taken_over_from_the_recorded_steps(pair: Pair) -> None:
    first = pair.worker()
    handles = [pair.client.start(WORKFLOW, str(pair.logs)) for _ in range(12)]
    # Killed once some executions have recorded their first step (and parked).
    wait_until(lambda: sum(bool(pair.runs(h.id, 0)) for h in handles) >= 4, timeout=60)
    first.kill()
    first.wait()
    pair.worker()
    assert [h.result(timeout=90) for h in handles] == [[0, 10, 20]] * 12
    for handle in handles:
        assert [s.idx for s in handle.steps()] == [0, 1, 2, 3]
        # A step recorded is never run again; one cut short by the kill may run twice.
        assert all(1 <= len(pair.runs(handle.id, i)) <= 2 for i in range(3))
    wait_until(lambda: pair.count(pair.queue, "messages") == 0, timeout=30)
    assert pair.count(pair.state, "messages") == 0
