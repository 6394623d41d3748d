"""The durable primitives on the embedded backend (SQLite: the same SQL as on rqlite;
tests/integration/test_primitives_cluster.py runs them on a 3-node cluster, and with
worker processes killed mid-wait). Sync and async workflows alike."""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.stores.inspect import Inspector
from raftflow.transports.db.clock import LocalClock

from raftflow import (
    Engine,
    ExecutionFinishedError,
    ExecutionNotFoundError,
    InvalidArgumentError,
    NonDeterminismError,
    NotInWorkflowError,
    ResultTimeoutError,
    Retry,
    Status,
    StepError,
    StepTimeoutError,
    WorkflowCancelledError,
    WorkflowFailedError,
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'primitives.db'}")
    yield engine
    engine.close()


def wait_for(predicate: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
    return value


# --- retries -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_step_is_retried_and_each_failed_attempt_is_recorded(engine: Engine, kind: str) -> None:
    calls: list[int] = []
    retry = Retry(max_attempts=4, delay=0.05, backoff=2.0)

    def body(x: int) -> int:
        calls.append(x)
        if len(calls) < 3:
            raise ConnectionError(f"flaky {len(calls)}")
        return x * 10

    if kind == "sync":

        @engine.step(retry=retry)
        def flaky(x: int) -> int:
            return body(x)

        @engine.workflow
        def wf(x: int) -> int:
            return flaky(x)

    else:

        @engine.step(retry=retry)
        async def flaky(x: int) -> int:
            return body(x)

        @engine.workflow
        async def wf(x: int) -> int:
            return await flaky(x)

    handle = engine.start(wf, 4)
    with engine.running_worker():
        assert handle.result(timeout=20) == 40
    (step,) = handle.steps()
    assert (step.status, step.attempts, step.output) == ("succeeded", 3, 40)
    assert [(a.attempt, a.type, a.message) for a in step.history] == [
        (1, "ConnectionError", "flaky 1"),
        (2, "ConnectionError", "flaky 2"),
    ]
    assert step.history[1].started_at >= step.history[0].ended_at + 0.05 - 0.01  # delay 1


def test_a_retry_is_due_a_whole_delay_after_the_recorded_end_of_the_attempt(
    tmp_path: Path,
) -> None:
    """The attempt's recorded end and the next attempt's due time come from one reading of
    the clock. Found in CI: a thread stalled 48 ms between two readings, and the next
    attempt started 1.7 ms after the recorded end of a 50 ms delay. Here the clock jumps
    48 ms whenever the recording of a failed attempt reads it."""
    stalls: list[float] = []

    def stalling_time() -> float:
        # The reading is the activation's now(), called by stage_retry itself.
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "now":
            frame = frame.f_back  # type: ignore[assignment]
        caller = None if frame is None else frame.f_back
        if caller is not None and caller.f_code.co_name == "stage_retry":
            stalls.append(0.048)
        return time.time() + sum(stalls)

    engine = Engine.from_url(
        f"sqlite:///{tmp_path / 'stall.db'}", clock=LocalClock(time_source=stalling_time)
    )
    try:
        calls: list[int] = []

        @engine.step(retry=Retry(max_attempts=3, delay=0.05))
        def flaky() -> int:
            calls.append(1)
            if len(calls) < 3:
                raise ConnectionError(f"flaky {len(calls)}")
            return len(calls)

        @engine.workflow
        def wf() -> int:
            return flaky()

        handle = engine.start(wf)
        with engine.running_worker():
            assert handle.result(timeout=20) == 3
        (step,) = handle.steps()
        assert len(stalls) >= 2  # the clock did stall where the end is recorded
        first, second = step.history
        assert second.started_at >= first.ended_at + 0.05
    finally:
        engine.close()


def test_retries_end_with_the_last_error_and_skip_errors_not_listed(engine: Engine) -> None:
    @engine.step(retry=Retry(max_attempts=3, delay=0.01, on=(ConnectionError,)))
    def always(kind: str) -> int:
        raise (ConnectionError if kind == "net" else ValueError)(kind)

    @engine.workflow
    def wf(kind: str) -> str:
        try:
            always(kind)
        except StepError as exc:
            return f"{exc.error.type}:{exc.error.message}"
        return "no error"

    net, bad = engine.start(wf, "net"), engine.start(wf, "bad")
    with engine.running_worker():
        assert net.result(timeout=20) == "ConnectionError:net"
        assert bad.result(timeout=20) == "ValueError:bad"
    assert [s.attempts for s in net.steps()] == [3]
    assert [len(s.history) for s in net.steps()] == [2]
    assert [s.attempts for s in bad.steps()] == [1]  # ValueError is not retried


def test_a_long_retry_wait_parks_the_execution_without_holding_a_slot(engine: Engine) -> None:
    calls: list[float] = []

    @engine.step(retry=Retry(max_attempts=2, delay=1.5))
    def later() -> str:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise ConnectionError("not yet")
        return "done"

    @engine.step
    def quick(i: int) -> int:
        return i

    @engine.workflow
    def retrying() -> str:
        return later()

    @engine.workflow
    def other(i: int) -> int:
        return quick(i)

    slow = engine.start(retrying)
    with engine.running_worker(concurrency=1):
        wait_for(lambda: calls)
        # With one slot, other executions run while the retry waits: it holds no slot.
        quick_ones = [engine.start(other, i) for i in range(3)]
        assert [h.result(timeout=5) for h in quick_ones] == [0, 1, 2]
        assert len(calls) == 1
        assert slow.steps()[0].status == "retrying"
        assert slow.result(timeout=10) == "done"
    assert calls[1] - calls[0] >= 1.5 - 0.05


# --- sleep ---------------------------------------------------------------------------------


def test_sleeping_executions_hold_no_slot(engine: Engine) -> None:
    @engine.workflow
    def nap(i: int) -> int:
        engine.sleep(2.0)
        return i

    handles = [engine.start(nap, i) for i in range(5)]
    started = time.monotonic()
    with engine.running_worker(concurrency=1):
        assert [h.result(timeout=10) for h in handles] == list(range(5))
    assert time.monotonic() - started >= 2.0
    sleeps = [handle.steps()[0] for handle in handles]
    for record in sleeps:
        assert record.kind == "sleep" and record.wake_at is not None
        assert record.wake_at - record.started_at == pytest.approx(2.0, abs=0.05)
    # All five asleep at once on one slot: asleep, they hold none (not one after another).
    assert max(r.started_at for r in sleeps) < min(r.wake_at or 0.0 for r in sleeps)


def test_async_sleep_short_and_zero(engine: Engine) -> None:
    @engine.workflow
    async def naps() -> float:
        start = time.monotonic()
        await engine.sleep_async(0)
        await engine.sleep_async(0.2)
        return time.monotonic() - start

    handle = engine.start(naps)
    with engine.running_worker():
        assert handle.result(timeout=10) >= 0.2
    assert [s.kind for s in handle.steps()] == ["sleep", "sleep"]


# --- signals -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_messages_are_received_in_send_order_each_once(engine: Engine, kind: str) -> None:
    if kind == "sync":

        @engine.workflow
        def inbox(n: int) -> list[Any]:
            got = [engine.recv("orders", timeout=10) for _ in range(n)]
            return [*got, engine.recv("other", timeout=0.3)]

    else:

        @engine.workflow
        async def inbox(n: int) -> list[Any]:
            got = [await engine.recv_async("orders", timeout=10) for _ in range(n)]
            return [*got, await engine.recv_async("other", timeout=0.3)]

    handle = engine.start(inbox, 3)
    engine.send(handle.id, {"n": 1}, topic="orders")  # before the recv: it waits
    with engine.running_worker():
        wait_for(lambda: [s for s in handle.steps() if s.kind == "recv"])
        engine.send(handle.id, {"n": 2}, topic="orders", key="k2")
        engine.send(handle.id, {"n": 2}, topic="orders", key="k2")  # a retried send: once
        engine.send(handle.id, {"n": 3}, topic="orders")
        assert handle.result(timeout=20) == [{"n": 1}, {"n": 2}, {"n": 3}, None]
    with pytest.raises(ExecutionFinishedError, match="finished"):
        engine.send(handle.id, "late", topic="orders")
    with pytest.raises(ExecutionNotFoundError):
        engine.send("no-such-execution", "hello")


def test_a_waiting_recv_holds_no_slot_and_wakes_on_send(engine: Engine) -> None:
    @engine.workflow
    def waiter() -> Any:
        return engine.recv(timeout=30)

    handles = [engine.start(waiter) for _ in range(3)]
    with engine.running_worker(concurrency=1):
        wait_for(lambda: all(h.steps() for h in handles))
        for i, handle in enumerate(handles):
            engine.send(handle.id, i)
        # Woken by the sends, not their recv's 30 s timeout: within result()'s 10 s.
        assert [h.result(timeout=10) for h in handles] == [0, 1, 2]


def test_sends_from_a_workflow_are_recorded_and_refusals_raise_there(engine: Engine) -> None:
    @engine.workflow
    def receiver() -> Any:
        return engine.recv(timeout=30)

    @engine.workflow
    def sender(target: str) -> str:
        engine.send(target, "ping")
        try:
            engine.send("nobody", "ping")
        except ExecutionNotFoundError as exc:
            return f"refused: {exc}"
        return "sent twice"

    target = engine.start(receiver)
    source = engine.start(sender, target.id)
    with engine.running_worker():
        assert target.result(timeout=10) == "ping"
        assert source.result(timeout=10).startswith("refused: no execution has id 'nobody'")
    assert [(s.kind, s.status) for s in source.steps()] == [
        ("send", "succeeded"),
        ("send", "failed"),
    ]


# --- events out ----------------------------------------------------------------------------


def test_events_publish_progress_to_any_caller(engine: Engine) -> None:
    @engine.workflow
    def progress() -> int:
        engine.set_event("stage", "started")
        engine.recv(timeout=10)
        engine.set_event("stage", {"done": True})
        return 1

    handle = engine.start(progress)
    with pytest.raises(ResultTimeoutError):
        engine.get_event(handle.id, "stage", timeout=0.1)
    with engine.running_worker():
        assert engine.get_event(handle.id, "stage", timeout=10) == "started"
        engine.send(handle.id, "go")
        assert handle.result(timeout=10) == 1
    assert engine.get_event(handle.id, "stage") == {"done": True}


# --- child workflows -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_children_run_and_their_outcomes_reach_the_parent(engine: Engine, kind: str) -> None:
    @engine.workflow
    def square(x: int) -> int:
        if x < 0:
            raise ValueError("negative")
        return x * x

    if kind == "sync":

        @engine.workflow
        def parent(xs: list[int]) -> list[Any]:
            handles = [engine.start(square, x) for x in xs]
            out: list[Any] = []
            for handle in handles:
                try:
                    out.append(handle.result())
                except WorkflowFailedError as exc:
                    out.append(exc.error.message)
            return out

    else:

        @engine.workflow
        async def parent(xs: list[int]) -> list[Any]:
            handles = [await engine.start_async(square, x) for x in xs]
            out: list[Any] = []
            for handle in handles:
                try:
                    out.append(await handle.result_async())
                except WorkflowFailedError as exc:
                    out.append(exc.error.message)
            return out

    handle = engine.start(parent, [2, -1, 3])
    with engine.running_worker(concurrency=2):
        assert handle.result(timeout=20) == [4, "negative", 9]
    children = handle.children()
    assert [c.id for c in children] == [f"{handle.id}/{i}" for i in range(3)]
    assert [c.status for c in children] == [Status.SUCCEEDED, Status.FAILED, Status.SUCCEEDED]
    assert all(c.parent_id == handle.id for c in children)


# --- cancel and timeouts -------------------------------------------------------------------


def test_cancel_stops_a_sleeping_parent_and_its_children(engine: Engine) -> None:
    ran: list[str] = []

    @engine.step
    def mark(what: str) -> str:
        ran.append(what)
        return what

    @engine.workflow
    def sleeper(i: int) -> int:
        engine.sleep(60)
        mark(f"child {i} woke")
        return i

    @engine.workflow
    def parent() -> int:
        kids = [engine.start(sleeper, i) for i in range(2)]
        return sum(kid.result() for kid in kids)

    handle = engine.start(parent)
    with engine.running_worker():
        wait_for(lambda: len(handle.children()) == 2 and all(
            engine.get(c.id).steps() for c in handle.children()))  # fmt: skip
        assert handle.cancel() is Status.RUNNING
        with pytest.raises(WorkflowCancelledError, match="cancelled"):
            handle.result(timeout=10)
        for child in handle.children():
            with pytest.raises(WorkflowCancelledError, match="parent was cancelled"):
                engine.get(child.id).result(timeout=10)
    assert ran == []
    assert engine.cancel(handle.id) is Status.CANCELLED  # finished: left as it is


def test_a_running_step_finishes_and_is_recorded_then_no_further_step_starts(
    engine: Engine,
) -> None:
    started = threading.Event()
    release = threading.Event()

    @engine.step
    def long(i: int) -> int:
        started.set()
        release.wait(10)
        return i

    @engine.workflow
    def wf() -> int:
        return long(1) + long(2)

    handle = engine.start(wf)
    with engine.running_worker():
        started.wait(10)
        engine.cancel(handle.id)
        release.set()
        with pytest.raises(WorkflowCancelledError):
            handle.result(timeout=10)
    assert [(s.name, s.output) for s in handle.steps()] == [("long", 1)]


def test_cancelling_a_finished_execution_changes_nothing(engine: Engine) -> None:
    @engine.workflow
    def quick() -> int:
        return 7

    handle = engine.start(quick)
    with engine.running_worker():
        assert handle.result(timeout=10) == 7
    assert engine.cancel(handle.id) is Status.SUCCEEDED
    assert handle.status() is Status.SUCCEEDED and handle.result() == 7


def test_an_execution_no_worker_has_started_is_cancelled_at_once(engine: Engine) -> None:
    """No worker runs: the cancel itself ends a pending execution -- queued, waiting for a
    concurrency slot, or debounced -- and removes its event, so a backlog can be cleared
    with no worker at all. One whose event a claim leased first (the claim and the cancel
    are ordered by Raft) is left to that claim's worker, as a running one is."""
    ran: list[int] = []

    @engine.workflow(concurrency=1)
    def job(i: int) -> int:
        ran.append(i)
        return i

    @engine.workflow
    def sync_user(i: int) -> int:
        ran.append(i)
        return i

    inspector = Inspector(engine.store.database)
    queued = engine.start(job, 0)  # holds the only slot, not claimed
    waiting = engine.start(job, 1)  # waits for the slot
    debounced = engine.start(sync_user, 2, execution_id="sync-user-2", debounce=60.0)
    for handle in (queued, waiting, debounced):
        assert inspector.detail(handle.id).queued  # its event, before
        assert handle.cancel() is Status.PENDING  # the status it had
        assert handle.status() is Status.CANCELLED  # at once: no worker runs
        with pytest.raises(WorkflowCancelledError, match="cancelled"):
            handle.result(timeout=0)
        assert not inspector.detail(handle.id).queued  # its event went with it
        assert handle.children() == []
    claimed = engine.start(job, 3)  # admitted: the cancelled ones freed the slot
    lease = engine.transport.claim("elsewhere", 0.3)  # a claim Raft ordered first
    assert lease is not None and lease.group_id == claimed.id
    assert claimed.cancel() is Status.PENDING
    assert claimed.status() is Status.PENDING and claimed.info().cancel_reason == "cancelled"
    last = engine.start(job, 4)
    with engine.running_worker():  # the lapsed claim's event: ended without running
        with pytest.raises(WorkflowCancelledError):
            claimed.result(timeout=10)
        assert last.result(timeout=10) == 4  # the slot is free again
    assert ran == [4]


def test_a_workflow_timeout_cancels_it_even_while_it_waits(engine: Engine) -> None:
    @engine.workflow(timeout=1.0)
    def slow() -> int:
        engine.sleep(30)
        return 1

    handle = engine.start(slow)
    # Cancelled while it sleeps 30 s: within result()'s 10 s (ResultTimeoutError otherwise).
    with engine.running_worker(), pytest.raises(WorkflowCancelledError, match="timeout"):
        handle.result(timeout=10)
    assert handle.info().error is not None and handle.info().error.message == "timeout"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_step_timeout_fails_the_attempt_and_the_retry_runs(engine: Engine, kind: str) -> None:
    attempts: list[int] = []
    retry = Retry(max_attempts=2, delay=0.01)

    if kind == "sync":

        @engine.step(timeout=0.3, retry=retry)
        def slow() -> str:
            attempts.append(1)
            if len(attempts) == 1:
                time.sleep(1.0)  # overruns: its late result is dropped
            return f"attempt {len(attempts)}"

        @engine.workflow
        def wf() -> str:
            return slow()

    else:
        import asyncio

        @engine.step(timeout=0.3, retry=retry)
        async def slow() -> str:
            attempts.append(1)
            if len(attempts) == 1:
                await asyncio.sleep(1.0)  # cancelled at the timeout
            return f"attempt {len(attempts)}"

        @engine.workflow
        async def wf() -> str:
            return await slow()

    handle = engine.start(wf)
    with engine.running_worker():
        assert handle.result(timeout=10) == "attempt 2"
    (step,) = handle.steps()
    assert step.history[0].type == "StepTimeoutError"
    assert issubclass(StepTimeoutError, TimeoutError)


# --- determinism and bad input -------------------------------------------------------------


def test_a_replay_meeting_another_call_names_both(engine: Engine) -> None:
    code = ["sleep"]

    @engine.workflow
    def fickle() -> int:
        if code[0] == "sleep":
            engine.sleep(1.2)  # parks: the next worker to claim it replays from the start
        else:
            engine.recv(timeout=0)
        return 1

    handle = engine.start(fickle)
    with engine.running_worker(sticky_cache=0):  # no continuation kept: woken, it replays
        wait_for(lambda: handle.steps())
        code[0] = "recv"  # the code changed while it slept
        with pytest.raises(WorkflowFailedError) as failed:
            handle.result(timeout=10)
    assert failed.value.error.type == "NonDeterminismError"
    assert "recorded as sleep 'sleep'" in failed.value.error.message
    assert "now calls recv ''" in failed.value.error.message
    assert issubclass(NonDeterminismError, Exception)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda e: e.sleep(-1), InvalidArgumentError),
        (lambda e: e.sleep(math.nan), InvalidArgumentError),
        (lambda e: e.sleep(math.inf), InvalidArgumentError),
        (lambda e: e.recv(topic=3), InvalidArgumentError),
        (lambda e: e.recv(topic="t" * 300), InvalidArgumentError),
        (lambda e: e.recv(timeout=-2), InvalidArgumentError),
        (lambda e: e.send("x", object()), InvalidArgumentError),
        (lambda e: e.send("x", "y" * 2_000_000), InvalidArgumentError),
        (lambda e: e.send("", "y"), InvalidArgumentError),
        (lambda e: e.sleep(1), NotInWorkflowError),
        (lambda e: e.recv(), NotInWorkflowError),
        (lambda e: e.set_event("k", 1), NotInWorkflowError),
    ],
)
def test_bad_input_and_calls_outside_a_workflow_are_refused(
    engine: Engine, call: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        call(engine)
    assert engine.list() == []


def test_a_sync_call_in_an_async_workflow_says_what_to_await(engine: Engine) -> None:
    @engine.workflow
    async def confused() -> None:
        engine.sleep(1)

    handle = engine.start(confused)
    with engine.running_worker(), pytest.raises(WorkflowFailedError, match="sleep_async"):
        handle.result(timeout=10)


def test_retry_rejects_nonsense() -> None:
    for bad in (
        {"max_attempts": 0},
        {"delay": -1},
        {"backoff": 0.5},
        {"max_delay": math.inf},
        {"on": (int,)},
    ):
        with pytest.raises(InvalidArgumentError):
            Retry(**bad)  # type: ignore[arg-type]
