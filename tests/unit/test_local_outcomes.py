"""handle.result() in a process whose worker ran the execution: woken by the worker when
the outcome commits, and handed that outcome, so it does not read it back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine import Engine, WorkflowFailedError
from raftflow.engine.local import Outcome
from raftflow.stores.base import Status


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'local.db'}")
    yield engine
    engine.close()


def count_reads(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[Status]:
    """The status each read of an execution by a handle saw."""
    from raftflow.engine.handle import WorkflowHandle

    reads: list[Status] = []
    info = WorkflowHandle.info

    def counted(handle: WorkflowHandle[Any]) -> Any:
        record = info(handle)
        reads.append(record.status)
        return record

    monkeypatch.setattr(WorkflowHandle, "info", counted)
    return reads


def test_a_result_computed_here_is_not_read_back(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    @engine.step
    def slow(x: int) -> int:
        release.wait(10)
        return x + 1

    @engine.workflow
    def job(x: int) -> int:
        return slow(x)

    @engine.workflow
    def broken(x: int) -> int:
        raise ValueError(f"no {x}")

    with engine.running_worker(concurrency=2):
        reads = count_reads(engine, monkeypatch)
        handle = engine.start(job, 41)
        timer = threading.Timer(0.3, release.set)
        timer.start()
        assert handle.result(timeout=10) == 42
        # It polled while the step ran, but never read the outcome: the worker handed it.
        assert reads and all(not status.is_final for status in reads)
        failing = engine.start(broken, 7)
        with pytest.raises(WorkflowFailedError, match="no 7"):
            failing.result(timeout=10)
        timer.join()


def test_an_outcome_older_than_what_was_read_is_not_taken(engine: Engine) -> None:
    """A kept outcome from before a read (an execution resumed since) is stale."""
    local = engine.local
    local.finished("x", Outcome("wf", Status.FAILED, None, '{"type": "E", "message": "old"}'))
    since = local.generation
    assert local.wait("x", since, 0.01) is None
    local.finished("x", Outcome("wf", Status.SUCCEEDED, "1", None))
    kept = local.wait("x", since, 0.01)
    assert kept is not None and kept.status is Status.SUCCEEDED and kept.output == "1"
