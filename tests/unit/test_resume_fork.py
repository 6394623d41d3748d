"""Resume a failed or cancelled execution from its last recorded step; fork a new one from
another's first steps. Both on the code deployed now: fix the bug, then run again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftflow import (
    Engine,
    ExecutionNotFoundError,
    InvalidArgumentError,
    Retry,
    Status,
    WorkflowFailedError,
    current_step,
)
from tests.support import wait_until


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


def test_resume_keeps_the_failed_attempts_and_gives_a_new_round_of_retries(
    engine: Engine,
) -> None:
    attempts: list[int] = []
    fixed = [False]

    @engine.step(retry=Retry(max_attempts=2, delay=0.01))
    def charge(x: int) -> int:
        attempts.append(current_step().attempt)
        if not fixed[0]:
            raise ConnectionError(f"declined (attempt {current_step().attempt})")
        return x

    @engine.workflow
    def pay(x: int) -> int:
        return charge(x)

    handle = engine.start(pay, 3)
    with engine.running_worker():
        with pytest.raises(WorkflowFailedError, match="attempt 2"):
            handle.result(timeout=10)
        assert engine.resume(handle.id) is True  # not fixed: 2 more attempts, then failed
        with pytest.raises(WorkflowFailedError, match="attempt 4"):
            handle.result(timeout=10)
        fixed[0] = True
        assert engine.resume(handle.id) is True
        assert handle.result(timeout=10) == 3
    assert attempts == [1, 2, 3, 4, 5]
    (step,) = handle.steps()
    assert (step.status, step.attempts) == ("succeeded", 5)  # before: 1, history ()
    assert [(a.attempt, a.type) for a in step.history] == [
        (n, "ConnectionError") for n in range(1, 5)
    ]
    assert [a.message for a in step.history] == [f"declined (attempt {n})" for n in range(1, 5)]
    assert [a.resumed_at is not None for a in step.history] == [False, True, False, True]
    assert all(a.started_at <= a.ended_at for a in step.history)


def test_resume_of_a_step_cancelled_while_retrying_keeps_its_attempts(engine: Engine) -> None:
    @engine.step(retry=Retry(max_attempts=3, delay=3600))
    def flaky() -> str:
        if current_step().attempt == 1:
            raise ConnectionError("first attempt")
        return "ok"

    @engine.workflow
    def job() -> str:
        return flaky()

    handle = engine.start(job)
    with engine.running_worker():
        wait_until(lambda: [s.status for s in handle.steps()] == ["retrying"])
        engine.cancel(handle.id)  # while it waits an hour for its 2nd attempt
        wait_until(lambda: handle.status() is Status.CANCELLED)
        assert engine.resume(handle.id) is True  # the 2nd attempt runs now
        assert handle.result(timeout=10) == "ok"
    (step,) = handle.steps()
    assert (step.status, step.attempts) == ("succeeded", 2)
    assert [(a.attempt, a.message) for a in step.history] == [(1, "first attempt")]


def test_fork_refuses_a_step_past_the_recorded_calls(engine: Engine) -> None:
    job, _, _ = buggy(engine)
    source = engine.start(job, 2)
    with engine.running_worker(), pytest.raises(WorkflowFailedError):
        source.result(timeout=10)
    assert len(source.steps()) == 2
    with pytest.raises(
        InvalidArgumentError, match=r"recorded 2 call\(s\): from_step must be 0\.\.2, not 9"
    ):
        engine.fork(source.id, from_step=9, new_execution_id="job-2-too-far")
    assert engine.store.get("job-2-too-far") is None  # nothing written
    assert engine.fork(source.id, from_step=2, new_execution_id="job-2-all").id == "job-2-all"
    with pytest.raises(ExecutionNotFoundError):
        engine.fork("nobody", 3)
