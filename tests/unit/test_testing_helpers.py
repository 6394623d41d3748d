"""engine.testing: virtual time (sleeps, recv timeouts, cron ticks), step overrides and
the assertion helpers, on the real engine over a SQLite file, in-process."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest
from raftflow.engine.testing import EPOCH, VirtualClock, WorkflowTestEnvironment

from raftflow import Engine, Retry, StepError
from raftflow.errors import ResultTimeoutError
from tests.support import wait_until

engine = Engine()


@engine.step
def send_mail(text: str) -> str:
    return f"sent: {text}"


@engine.step
def charge(amount: int) -> str:
    raise ConnectionError("the real payment API must not be called in tests")


@engine.workflow
def trial(user: str) -> str:
    send_mail(f"welcome {user}")
    engine.sleep(14 * 86400)
    return send_mail(f"your trial ends, {user}")


@engine.workflow
def pay(amount: int) -> str:
    try:
        return charge(amount)
    except StepError as exc:
        return f"failed: {exc.error.type}"


@engine.workflow
def review(doc: str) -> str:
    answer = engine.recv("review", timeout=3 * 86400)
    return "timed out" if answer is None else str(answer)


@engine.workflow
def forever(doc: str) -> str:
    return str(engine.recv("never", timeout=None))


@engine.scheduled("0 * * * *")
def hourly(at: datetime) -> str:
    return at.isoformat()


def test_a_two_week_sleep_finishes_at_once_in_virtual_time() -> None:
    started = time.monotonic()
    with WorkflowTestEnvironment(engine) as env:
        handle = engine.start(trial, "ann")
        assert env.result(handle) == "sent: your trial ends, ann"
        assert env.step_names(handle) == ["send_mail", "sleep", "send_mail"]
        assert env.now() == EPOCH + timedelta(days=14)
        (sleep,) = [s for s in env.steps(handle) if s.kind == "sleep"]
        assert sleep.wake_at == (EPOCH + timedelta(days=14)).timestamp()
    assert time.monotonic() - started < 10


def test_overrides_replace_a_step_for_the_environment_only() -> None:
    with WorkflowTestEnvironment(engine) as env:
        env.override(charge, result="ch_123")
        assert env.result(engine.start(pay, 5)) == "ch_123"
    with WorkflowTestEnvironment(engine) as env:
        env.override("charge", raises=ValueError("card declined"))
        assert env.result(engine.start(pay, 5)) == "failed: ValueError"
        env.override(send_mail, side_effect=lambda text: text.upper())
        assert env.result(engine.start(trial, "bo")) == "YOUR TRIAL ENDS, BO"
    # Restored: the real function again.
    assert charge.__wrapped__ is not None  # type: ignore[attr-defined]
    with pytest.raises(ConnectionError):
        charge(1)


def test_recv_timeouts_and_signals_in_virtual_time() -> None:
    with WorkflowTestEnvironment(engine) as env:
        waiting = engine.start(review, "q3")
        assert env.result(waiting) == "timed out"
        assert env.now() == EPOCH + timedelta(days=3)
        answered = engine.start(review, "q4")
        env.advance(3600)
        engine.send(answered.id, "ok", topic="review")
        assert env.result(answered) == "ok"
        stuck = engine.start(forever, "x")
        with pytest.raises(ResultTimeoutError, match="virtual seconds"):
            env.result(stuck, within=30 * 86400)


def test_cron_ticks_fire_once_each_as_time_advances() -> None:
    with WorkflowTestEnvironment(engine) as env:  # schedules off by default
        env.advance(3 * 3600)
        assert [r for r in engine.list() if r.workflow == "hourly"] == []
    with WorkflowTestEnvironment(engine, schedules=True) as env:
        env.advance(3 * 3600 + 60)
        ids = sorted(r.id for r in engine.list(limit=1000) if r.workflow == "hourly")
        assert ids == [
            "hourly@2030-01-01T01:00:00+00:00",
            "hourly@2030-01-01T02:00:00+00:00",
            "hourly@2030-01-01T03:00:00+00:00",
        ]
        assert engine.get(ids[0]).result(timeout=5) == "2030-01-01T01:00:00+00:00"
        (info,) = [i for i in engine.list_schedules() if i.workflow == "hourly"]
        assert info.next_at == (EPOCH + timedelta(hours=4)).timestamp()


def test_virtual_clock() -> None:
    clock = VirtualClock(100.0)
    clock.advance(5)
    assert clock.time() == 105.0 == clock.estimate()
    clock.set(EPOCH)
    assert clock.current() == EPOCH
    with pytest.raises(Exception, match="never goes back"):
        clock.advance(-1)


other = Engine()  # its own schedules: they do not tick in the tests above


@other.step
async def send_mail_async(text: str) -> str:
    return f"sent: {text}"


@other.scheduled("*/30 * * * * *")
async def half_minutely(at: datetime) -> str:
    return await send_mail_async(at.isoformat())


def test_an_async_scheduled_workflow_ticks_in_virtual_time() -> None:
    with WorkflowTestEnvironment(other, schedules=True) as env:
        env.advance(90)
        done = sorted((r.id, r.output) for r in other.list())
        assert done[0][1] == "sent: 2030-01-01T00:00:30+00:00"
        assert [i for i, _ in done] == [
            "half_minutely@2030-01-01T00:00:30+00:00",
            "half_minutely@2030-01-01T00:01:00+00:00",
            "half_minutely@2030-01-01T00:01:30+00:00",
        ]


def test_retention_deletes_what_finished_before_the_period_and_nothing_else() -> None:
    from raftflow.stores.retention import RetentionFlows

    with WorkflowTestEnvironment(engine) as env:
        env.override(charge, result="ok")
        finished = engine.start(pay, 1)
        assert env.result(finished) == "ok"
        asleep = engine.start(trial, "zed")  # sleeps 14 days: unfinished all along
        env.advance(10 * 86400)
        flows = RetentionFlows(env.clock)
        keep = 7 * 86400.0
        assert engine.store.run(flows.due(keep))
        assert engine.store.run(flows.delete_batch(keep, 100)) == 1
        assert not engine.store.run(flows.due(keep))
        assert [r.id for r in engine.list()] == [asleep.id]
        assert engine.store.steps(finished.id) == []
        assert env.result(asleep) == "sent: your trial ends, zed"


def test_workers_make_a_removed_schedule_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Removed while a worker still registers it (or acked by an older worker that took
    it for a deleted execution's event): the worker's check makes it again."""
    from raftflow.engine.runtime import schedules

    monkeypatch.setattr(schedules, "SCHEDULE_CHECK_INTERVAL", 0.05)
    with WorkflowTestEnvironment(other, schedules=True):
        assert [i.workflow for i in other.list_schedules()] == ["half_minutely"]
        assert other.remove_schedule(half_minutely)
        wait_until(lambda: other.list_schedules(), timeout=10)


flaky_calls: list[float] = []


@engine.step(retry=Retry(max_attempts=4, delay=0.25, backoff=2.0))
def flaky(n: int) -> int:
    flaky_calls.append(time.monotonic())
    if len(flaky_calls) < 3:
        raise ConnectionError("try again")
    return n


@engine.workflow
def short_waits(n: int) -> int:
    engine.sleep(0.5)
    return flaky(n)


@other.step(retry=Retry(max_attempts=3, delay=0.5, backoff=1.0))
async def flaky_async(n: int) -> int:
    flaky_calls.append(time.monotonic())
    if len(flaky_calls) < 2:
        raise ConnectionError("try again")
    return n


@other.workflow
async def short_waits_async(n: int) -> int:
    await other.sleep_async(0.25)
    return await flaky_async(n)


def test_short_sleeps_and_retry_delays_take_virtual_time_too() -> None:
    """Under a second, the engine pauses in place on a real clock; under the virtual
    clock every wait parks and ends when the clock gets there, never in real time."""
    flaky_calls.clear()
    with WorkflowTestEnvironment(engine) as env:
        handle = engine.start(short_waits, 7)
        assert env.result(handle) == 7
        # 0.5 s of sleep, then retry delays of 0.25 s and 0.5 s: virtual, and exact.
        assert env.now() == EPOCH + timedelta(seconds=0.5 + 0.25 + 0.5)
        assert env.step_names(handle) == ["sleep", "flaky"]
        (step,) = [s for s in env.steps(handle) if s.name == "flaky"]
        assert step.attempts == 3
        assert len(flaky_calls) == 3
    flaky_calls.clear()
    with WorkflowTestEnvironment(other) as env:
        handle = other.start(short_waits_async, 3)
        assert env.result(handle) == 3
        assert env.now() == EPOCH + timedelta(seconds=0.25 + 0.5)


def test_a_short_wait_does_not_end_until_the_clock_moves() -> None:
    flaky_calls.clear()
    with WorkflowTestEnvironment(engine) as env:
        handle = engine.start(short_waits, 1)
        env.advance(0.3)
        time.sleep(0.6)  # real time passes: the 0.5 s sleep goes on
        env.settle()
        assert flaky_calls == [] and not handle.status().is_final
        # The sleep ends (0.3 + 0.2 is not exact in floats: reached all the same); the
        # first attempt fails: 0.25 s to the next.
        env.advance(0.2)
        assert len(flaky_calls) == 1
        time.sleep(0.4)
        env.settle()
        assert len(flaky_calls) == 1
        env.advance(0.25)
        assert len(flaky_calls) == 2
        assert env.result(handle) == 1
        assert env.now() == EPOCH + timedelta(seconds=0.5 + 0.25 + 0.5)
