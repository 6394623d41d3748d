"""handle.result() in a process whose worker runs the execution is woken by that worker
when the outcome commits, instead of waiting for its next poll, and takes the outcome from
it when it was waiting before the commit was sent; a finish that happens while it reads is
not missed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from raftflow.engine.runtime.local import KEPT_OUTCOMES, LocalWorkers
from raftflow.stores.records import ErrorInfo, Status

from raftflow import Engine, WorkflowFailedError
from tests.support import wait_until


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'local.db'}")
    yield engine
    engine.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the executions handles read (WorkflowHandle.info), in order."""
    from raftflow.engine.client.handle import WorkflowHandle

    read: list[str] = []
    info = WorkflowHandle.info

    def counted(self: WorkflowHandle[object]) -> object:
        read.append(self.id)
        return info(self)

    monkeypatch.setattr(WorkflowHandle, "info", counted)
    return read


def test_result_is_woken_when_the_worker_commits_the_outcome(engine: Engine) -> None:
    release = threading.Event()

    @engine.step
    def slow(x: int) -> int:
        release.wait(30)
        return x + 1

    @engine.workflow
    def job(x: int) -> int:
        return slow(x)

    @engine.workflow
    def broken(x: int) -> int:
        raise ValueError(f"no {x}")

    # Whether each of result()'s waits between polls ended at news from the worker.
    woken: list[bool] = []
    wait = engine.local.wait

    def noted(execution_id: str, since: int, timeout: float) -> None:
        wait(execution_id, since, timeout)
        woken.append(engine.local.news(execution_id) != since)

    engine.local.wait = noted  # type: ignore[method-assign]
    with engine.running_worker(concurrency=2):
        handle = engine.start(job, 41)
        # Polls 10 ms apart, growing 1.5x: after 5 s one is seconds away from the next.
        threading.Timer(5.0, release.set).start()
        assert handle.result(timeout=30, poll_interval=60.0) == 42
        # Its last wait ended at the worker's news (not at its next poll), then it returned.
        assert woken and woken[-1], woken
        failing = engine.start(broken, 7)
        with pytest.raises(WorkflowFailedError, match="no 7"):
            failing.result(timeout=10)


def test_a_finish_before_the_wait_is_not_missed() -> None:
    """The news count is taken before the read: a finish in between wakes at once."""
    local = LocalWorkers()
    local.watch("e1")
    since = local.news("e1")
    local.finished("e1")  # an outcome committed while the waiter was reading
    started = time.monotonic()
    local.wait("e1", since, 30.0)
    assert time.monotonic() - started < 30.0  # at once: not its timeout
    since = local.news("e1")
    started = time.monotonic()
    local.wait("e1", since, 0.2)  # nothing new: the full timeout
    assert time.monotonic() - started >= 0.19
    local.unwatch("e1")


def test_news_wakes_only_the_waiters_of_its_execution() -> None:
    """A finish wakes the result() waiters of that execution, not every waiter in the
    process; news of an execution nobody watches is not kept."""
    local = LocalWorkers()
    local.finished("nobody")  # not watched: nothing kept for a later waiter
    local.watch("nobody")
    assert local.news("nobody") == 0
    local.unwatch("nobody")
    woken: dict[str, float] = {}
    local.watch("a")
    local.watch("b")

    def waiter(execution_id: str) -> None:
        since = local.news(execution_id)
        started = time.monotonic()
        local.wait(execution_id, since, 30.0 if execution_id == "a" else 1.5)
        woken[execution_id] = time.monotonic() - started

    threads = [threading.Thread(target=waiter, args=(e,)) for e in ("a", "b")]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    local.finished("a")
    local.release("a")  # a turn's end is news too, to the same waiters only
    for thread in threads:
        thread.join()
    assert woken["a"] < 30.0  # woken by its news, not its timeout
    assert woken["b"] >= 1.4  # slept its full timeout: "a"'s news was not for it
    local.unwatch("a")
    local.unwatch("b")
    assert local._watched == {}  # nothing left behind


def test_result_does_not_read_an_execution_its_process_runs(
    engine: Engine, reads: list[str]
) -> None:
    """Started on this process's worker (the fast path), the execution is not read while
    that worker runs it, nor after: the worker hands its outcome over. A turn that ends
    without an outcome (a long sleep parks it) is news too: the waiter goes back to
    reading, and a timeout reads before it raises."""
    from raftflow import ResultTimeoutError

    release = threading.Event()

    @engine.step
    def slow(x: int) -> int:
        release.wait(30)
        return x + 1

    @engine.workflow
    def job(x: int) -> int:
        return slow(x)

    @engine.workflow
    def napping(x: int) -> int:
        engine.sleep(1.5)
        return x

    with engine.running_worker(concurrency=2):
        handle = engine.start(job, 1)
        assert engine.local.holds(handle.id)
        threading.Timer(0.5, release.set).start()
        assert handle.result(timeout=30) == 2
        assert reads == []  # not one read: the worker handed its outcome over
        release.clear()
        stuck = engine.start(job, 2)
        reads.clear()
        with pytest.raises(ResultTimeoutError):
            stuck.result(timeout=0.3)
        assert reads == [stuck.id]  # read once, at the timeout
        release.set()
        assert stuck.result(timeout=30) == 3
        sleeper = engine.start(napping, 5)
        assert sleeper.result(timeout=30) == 5
    assert not engine.local.holds(handle.id) and not engine.local.holds(sleeper.id)


def test_an_outcome_is_handed_only_to_waiters_there_before_its_commit_was_sent() -> None:
    local = LocalWorkers()
    local.hold("x", "job")
    early = local.ticket()  # a result() that began before the commit was sent
    sent = local.ticket()  # the worker, just before it sends the commit
    late = local.ticket()  # a result() that began after: the execution may change since
    local.settled("x", sent, Status.SUCCEEDED, {"total": 5}, None)
    kept = local.outcome("x", early)
    assert kept is not None and (kept.workflow, kept.status, kept.output) == (
        "job",
        Status.SUCCEEDED,
        {"total": 5},
    )
    assert local.outcome("x", late) is None
    # Only executions a worker here was handed at their start are kept.
    local.settled("y", local.ticket(), Status.FAILED, None, ErrorInfo("ValueError", "no"))
    assert local.outcome("y", 0) is None
    # And only the most recent ones.
    for i in range(KEPT_OUTCOMES + 1):
        local.hold(f"z{i}", "job")
        local.settled(f"z{i}", local.ticket(), Status.SUCCEEDED, i, None)
    assert local.outcome("x", early) is None and local.outcome(f"z{KEPT_OUTCOMES}", 0) is not None


def test_result_reads_an_outcome_committed_before_it_was_called(
    engine: Engine, reads: list[str]
) -> None:
    """A waiter there before the commit takes the outcome from the worker (no read), a
    failure too; a result() called after the commit reads it."""
    release = threading.Event()

    @engine.step
    def slow(x: int) -> int:
        release.wait(30)
        if x < 0:
            raise ValueError(f"no {x}")
        return x + 1

    @engine.workflow
    def job(x: int) -> int:
        return slow(x)

    with engine.running_worker(concurrency=2):
        handle, failing = engine.start(job, 1), engine.start(job, -7)
        errors: list[BaseException] = []

        def wait_failing() -> None:
            try:
                failing.result(timeout=30)
            except WorkflowFailedError as exc:
                errors.append(exc)

        waiter = threading.Thread(target=wait_failing)
        waiter.start()
        threading.Timer(0.3, release.set).start()
        assert handle.result(timeout=30) == 2
        waiter.join(30)
        assert len(errors) == 1 and "no -7" in str(errors[0])
        assert reads == []
        assert handle.result(timeout=5) == 2
        assert reads == [handle.id]


def test_a_slot_given_back_by_a_start_that_found_its_execution_wakes_the_claims(
    tmp_path: Path,
) -> None:
    """A start in a process running a worker reserves a free slot of it (the fast path);
    a start that finds its execution already there gives the slot back. The worker's claim
    loop, which saw every slot taken meanwhile and waits for one to be freed, must be woken
    by that too -- not only by an execution ending -- or a worker of one slot claims
    nothing ever again (found by the simulator, seed 1527)."""
    url = f"sqlite:///{tmp_path / 'slots.db'}"
    engine = Engine.from_url(url)

    @engine.workflow
    def hello(name: str) -> str:
        return f"hello {name}"

    with engine.running_worker(concurrency=1, max_poll_interval=0.02):
        run = engine.local.reserve(0, engine.registry.lane(engine.registry.workflow(hello)))
        assert run is not None  # the worker's only slot, as a start takes it
        time.sleep(0.2)  # the claim loop meets no free slot and waits for one
        run.unreserve()  # the start found its execution: the slot goes back
        with Engine.from_url(url) as elsewhere:  # a start the worker must claim
            elsewhere.workflow(hello)
            handle = elsewhere.start("hello", "world")
            assert handle.result(timeout=10) == "hello world"
    engine.close()


def test_an_adopted_start_wakes_the_claims_only_when_its_slot_is_freed(tmp_path: Path) -> None:
    """An adopted start turns its reserved slot into its task: no slot is freed then, so
    the claim loop is not woken (it was, once per adoption, through the loop's self-pipe);
    it is woken once per execution, when its task ends and frees the slot."""
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'adopt.db'}")

    @engine.workflow
    def hello(name: str) -> str:
        return f"hello {name}"

    with engine.running_worker(concurrency=1) as worker:
        (run,) = worker._runs
        sets = 0
        original = run.slot_freed.set

        def counted() -> None:
            nonlocal sets
            sets += 1
            original()

        run.slot_freed.set = counted  # type: ignore[method-assign]
        adopted = run.stats.adopted
        for n in range(5):
            assert engine.start(hello, str(n)).result(timeout=10) == f"hello {n}"
        wait_until(lambda: not run.tasks and sets >= 5)  # every task ended, and told
        assert run.stats.adopted - adopted == 5  # every start took the fast path
        assert sets == 5
    engine.close()
