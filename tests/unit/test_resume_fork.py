"""Resume a failed or cancelled execution from its last recorded step; fork a new one from
another's first steps. Both on the code deployed now: fix the bug, then run again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftflow import Engine, ExecutionNotFoundError, Status, WorkflowFailedError


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'resume.db'}")
    yield engine
    engine.close()


def buggy(engine: Engine) -> tuple[object, Counter[str], list[bool]]:
    calls: Counter[str] = Counter()
    fixed = [False]

    @engine.step
    def fetch(x: int) -> int:
        calls["fetch"] += 1
        return x * 10

    @engine.step
    def compute(v: int) -> int:
        calls["compute"] += 1
        if not fixed[0]:
            raise ZeroDivisionError("the bug")
        return v + 1

    @engine.workflow
    def job(x: int) -> int:
        return compute(fetch(x))

    return job, calls, fixed


def test_resume_runs_a_failed_execution_again_from_the_step_that_failed(engine: Engine) -> None:
    job, calls, fixed = buggy(engine)
    handle = engine.start(job, 4)
    with engine.running_worker():
        with pytest.raises(WorkflowFailedError, match="the bug"):
            handle.result(timeout=10)
        fixed[0] = True  # the fix is deployed
        assert engine.resume(handle.id) is True
        assert handle.result(timeout=10) == 41
    assert calls == Counter({"fetch": 1, "compute": 2})  # fetch was not called again
    assert [(s.name, s.status) for s in handle.steps()] == [
        ("fetch", "succeeded"),
        ("compute", "succeeded"),
    ]
    assert engine.resume(handle.id) is False  # succeeded: left as it is
    assert handle.status() is Status.SUCCEEDED


def test_resume_runs_a_cancelled_execution_on(engine: Engine) -> None:
    @engine.workflow
    def waiter() -> str:
        return engine.recv(timeout=30) or "timed out"

    handle = engine.start(waiter)
    with engine.running_worker():
        engine.cancel(handle.id)
        while handle.status() is not Status.CANCELLED:
            pass
        assert engine.resume(handle.id) is True
        engine.send(handle.id, "hello")
        assert handle.result(timeout=10) == "hello"
    with pytest.raises(ExecutionNotFoundError):
        engine.resume("nobody")


def test_fork_reuses_the_recorded_steps_and_runs_from_the_one_asked(engine: Engine) -> None:
    job, calls, fixed = buggy(engine)
    source = engine.start(job, 7)
    with engine.running_worker():
        with pytest.raises(WorkflowFailedError):
            source.result(timeout=10)
        fixed[0] = True
        fork = engine.fork(source.id, from_step=1, new_execution_id="job-7-fixed")
        assert fork.result(timeout=10) == 71
        again = engine.fork(source.id, from_step=1, new_execution_id="job-7-fixed")
        assert again.id == fork.id  # idempotent by id
    assert calls == Counter({"fetch": 1, "compute": 2})  # the fork did not fetch again
    assert source.status() is Status.FAILED  # the source is left as it is
    assert [s.status for s in fork.steps()] == ["succeeded", "succeeded"]
    with pytest.raises(ExecutionNotFoundError):
        engine.fork("nobody", 0)
