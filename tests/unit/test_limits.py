"""Concurrency limits and debounced starts on the embedded backend (SQLite: the same SQL
as on rqlite; tests/integration/test_limits_cluster.py runs them on a 3-node cluster with
worker processes, and kills one holding a slot). Sync and async workflows alike."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from raftflow.transports.db.flow import Request, Statement

from raftflow import (
    ConfigurationError,
    Engine,
    InputValidationError,
    InvalidArgumentError,
    RateLimit,
    Status,
    WorkflowCancelledError,
    current_step,
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'limits.db'}")
    yield engine
    engine.close()


class Job(BaseModel):
    customer: str
    n: int


class Tracker:
    """How many step bodies run at once (overall and per customer), and in which order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.order: list[tuple[str, int]] = []

    def enter(self, job: Job) -> None:
        with self.lock:
            for key in ("*", job.customer):
                self.now[key] = self.now.get(key, 0) + 1
                self.peak[key] = max(self.peak.get(key, 0), self.now[key])
            self.order.append((job.customer, job.n))

    def leave(self, job: Job) -> None:
        with self.lock:
            for key in ("*", job.customer):
                self.now[key] -= 1


def limited(engine: Engine, kind: str, tracker: Tracker, **limit: Any) -> Any:
    """A workflow of two steps with a sleep between them, under ``limit``."""
    if kind == "sync":

        @engine.step
        def first(job: Job) -> int:
            tracker.enter(job)
            time.sleep(0.03)
            return job.n

        @engine.step
        def last(job: Job) -> int:
            time.sleep(0.03)
            tracker.leave(job)
            return job.n

        @engine.workflow(**limit)
        def wf(job: Job) -> int:
            first(job)
            engine.sleep(0.05)  # the slot is kept while it sleeps
            return last(job)

    else:

        @engine.step
        async def first(job: Job) -> int:
            tracker.enter(job)
            time.sleep(0.03)
            return job.n

        @engine.step
        async def last(job: Job) -> int:
            time.sleep(0.03)
            tracker.leave(job)
            return job.n

        @engine.workflow(**limit)
        async def wf(job: Job) -> int:
            await first(job)
            await engine.sleep_async(0.05)
            return await last(job)

    return wf


def read(engine: Engine, sql: str, **params: Any) -> list[dict[str, Any]]:
    request = Request((Statement("test", sql, params),), level="strong")
    return engine.store.run(_single(request))


def _single(request: Request) -> Any:
    response = yield request
    return response.raise_for_errors()[0].dicts()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_at_most_n_run_at_once_and_they_are_admitted_in_start_order(
    engine: Engine, kind: str
) -> None:
    tracker = Tracker()
    wf = limited(engine, kind, tracker, concurrency=2)
    handles = [engine.start(wf, Job(customer="a", n=i)) for i in range(8)]
    with engine.running_worker(concurrency=8):
        assert [h.result(timeout=30) for h in handles] == list(range(8))
    assert tracker.peak["*"] == 2  # reached, never passed
    firsts = [n for _, n in tracker.order]
    # Admission is FIFO: two slots, so an execution starts at most one place out of order.
    assert sorted(firsts) == list(range(8))
    assert all(abs(n - i) <= 1 for i, n in enumerate(firsts)), firsts


def test_control_without_a_limit_more_run_at_once(engine: Engine) -> None:
    """The same workflow and worker without the limit: the test above can fail."""
    tracker = Tracker()
    wf = limited(engine, "sync", tracker)
    handles = [engine.start(wf, Job(customer="a", n=i)) for i in range(8)]
    with engine.running_worker(concurrency=8):
        for handle in handles:
            handle.result(timeout=30)
    assert tracker.peak["*"] > 2


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_concurrency_key_limits_each_key_apart(engine: Engine, kind: str) -> None:
    tracker = Tracker()
    wf = limited(engine, kind, tracker, concurrency=1, concurrency_key=lambda job: job.customer)
    jobs = [Job(customer=c, n=i) for i in range(5) for c in ("a", "b", "c")]
    handles = [engine.start(wf, job) for job in jobs]
    with engine.running_worker(concurrency=8):
        for handle in handles:
            handle.result(timeout=30)
    assert tracker.peak["a"] == tracker.peak["b"] == tracker.peak["c"] == 1
    assert tracker.peak["*"] > 1  # the keys ran side by side
    for customer in "abc":  # FIFO within a key
        assert [n for c, n in tracker.order if c == customer] == list(range(5))
    rows = read(engine, "SELECT DISTINCT limit_key FROM executions ORDER BY 1")
    assert [r["limit_key"] for r in rows] == ["wf:a", "wf:b", "wf:c"]


def test_waiting_executions_are_gated_and_never_claimed(engine: Engine) -> None:
    @engine.workflow(concurrency=1)
    def holder(topic: str) -> Any:
        return engine.recv(topic, timeout=60)

    first = engine.start(holder, "go")
    waiting = [engine.start(holder, "go") for _ in range(5)]
    with engine.running_worker(concurrency=4) as worker:
        wait_for(lambda: worker.stats.commits >= 1)  # the holder waits, parked, in its recv
        claims = worker.stats.claimed
        time.sleep(0.5)  # idle polls only: nothing claimable
        assert worker.stats.claimed == claims
        assert not engine.transport.claimable()
        gated = read(engine, "SELECT COUNT(*) AS n FROM groups WHERE ready_at >= 1e18")
        assert gated[0]["n"] == 5
        assert all(engine.store.get(h.id).status is Status.PENDING for h in waiting)  # type: ignore[union-attr]
        engine.send(first.id, "one", topic="go")
        assert first.result(timeout=10) == "one"
        wait_for(lambda: engine.store.get(waiting[0].id).status is Status.RUNNING)  # type: ignore[union-attr]
        assert engine.store.get(waiting[1].id).status is Status.PENDING  # type: ignore[union-attr]
        for handle in waiting:
            engine.send(handle.id, "x", topic="go")
        assert [h.result(timeout=10) for h in waiting] == ["x"] * 5


def test_a_waiting_execution_is_cancelled_at_once_and_takes_no_slot(engine: Engine) -> None:
    @engine.workflow(concurrency=1)
    def holder(topic: str) -> Any:
        return engine.recv(topic, timeout=60)

    first = engine.start(holder, "go")
    second, third = engine.start(holder, "go"), engine.start(holder, "go")
    with engine.running_worker(concurrency=4):
        wait_for(lambda: engine.store.get(first.id).status is Status.RUNNING)  # type: ignore[union-attr]
        engine.cancel(second.id)
        with pytest.raises(WorkflowCancelledError):
            second.result(timeout=10)
        assert engine.store.get(third.id).status is Status.PENDING  # type: ignore[union-attr]
        engine.send(first.id, 1, topic="go")
        engine.send(third.id, 3, topic="go")
        assert first.result(timeout=10) == 1 and third.result(timeout=10) == 3


def test_a_resumed_execution_waits_for_a_slot_again(engine: Engine) -> None:
    attempts: list[str] = []

    @engine.step
    def fragile(topic: str) -> str:
        attempts.append(topic)
        if topic == "boom" and attempts.count("boom") == 1:
            raise RuntimeError("first time")
        return topic

    @engine.workflow(concurrency=1)
    def wf(topic: str) -> Any:
        fragile(topic)
        return engine.recv(topic, timeout=60) if topic == "hold" else topic

    failed = engine.start(wf, "boom")
    with engine.running_worker(concurrency=4):
        wait_for(lambda: engine.store.get(failed.id).status is Status.FAILED)  # type: ignore[union-attr]
        holder = engine.start(wf, "hold")
        wait_for(lambda: engine.store.get(holder.id).status is Status.RUNNING)  # type: ignore[union-attr]
        assert engine.resume(failed.id)
        time.sleep(0.3)
        assert engine.store.get(failed.id).status is Status.PENDING  # type: ignore[union-attr]
        engine.send(holder.id, "done", topic="hold")
        assert failed.result(timeout=10) == "boom"


def test_a_waiter_past_its_workflow_timeout_is_cancelled_without_a_slot(engine: Engine) -> None:
    @engine.workflow(concurrency=1, timeout=1.0)
    def holder(topic: str) -> Any:
        return engine.recv(topic, timeout=60)

    first = engine.start(holder, "go")
    second = engine.start(holder, "go")
    with engine.running_worker(concurrency=4):
        for handle in (first, second):  # the holder's recv ends at its timeout; the waiter's too
            with pytest.raises(WorkflowCancelledError):
                handle.result(timeout=10)
    assert engine.store.get(second.id).steps_done == 0  # type: ignore[union-attr]


def test_a_fork_of_a_limited_execution_waits_for_a_slot(engine: Engine) -> None:
    @engine.workflow(concurrency=1)
    def holder(topic: str) -> Any:
        return engine.recv(topic, timeout=60)

    first = engine.start(holder, "go")
    with engine.running_worker(concurrency=4):
        engine.send(first.id, "one", topic="go")
        assert first.result(timeout=10) == "one"
        second = engine.start(holder, "go")
        wait_for(lambda: engine.store.get(second.id).status is Status.RUNNING)  # type: ignore[union-attr]
        fork = engine.fork(first.id, from_step=0, new_execution_id="forked")
        time.sleep(0.3)
        assert engine.store.get(fork.id).status is Status.PENDING  # type: ignore[union-attr]
        engine.send(second.id, "two", topic="go")
        assert second.result(timeout=10) == "two"
        wait_for(lambda: engine.store.get(fork.id).status is Status.RUNNING)  # type: ignore[union-attr]
        engine.send(fork.id, "three", topic="go")
        assert fork.result(timeout=10) == "three"


def test_a_child_workflow_obeys_its_limit(engine: Engine) -> None:
    tracker = Tracker()
    child = limited(engine, "sync", tracker, concurrency=1, name="child")

    @engine.workflow
    def parent(n: int) -> list[int]:
        handles = [engine.start(child, Job(customer="c", n=i)) for i in range(n)]
        return [h.result() for h in handles]

    handle = engine.start(parent, 4)
    with engine.running_worker(concurrency=8):
        assert handle.result(timeout=30) == [0, 1, 2, 3]
    assert tracker.peak["*"] == 1


def test_bad_limits_are_refused_at_decoration_and_at_start(engine: Engine) -> None:
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ConfigurationError, match="concurrency"):
            engine.workflow(concurrency=bad)(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="concurrency_key needs concurrency"):
        engine.workflow(concurrency_key=lambda x: x)(lambda x: x)
    with pytest.raises(ConfigurationError, match="function"):
        engine.workflow(concurrency=1, concurrency_key="customer")(lambda x: x)  # type: ignore[arg-type]

    @engine.workflow(concurrency=1, concurrency_key=lambda job: job.n)
    def not_a_str(job: Job) -> None:
        return None

    @engine.workflow(concurrency=1, concurrency_key=lambda job: job.missing)
    def raises(job: Job) -> None:
        return None

    with pytest.raises(InputValidationError, match="must return a str"):
        engine.start(not_a_str, Job(customer="a", n=1))
    with pytest.raises(InputValidationError, match="failed on the input"):
        engine.start(raises, Job(customer="a", n=1))
    assert engine.list() == []  # nothing was written


# --- debounce ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_debounced_starts_fold_into_one_run_with_the_last_input(engine: Engine, kind: str) -> None:
    runs: list[int] = []
    if kind == "sync":

        @engine.workflow
        def sync_user(n: int) -> int:
            runs.append(n)
            return n

    else:

        @engine.workflow
        async def sync_user(n: int) -> int:
            runs.append(n)
            return n

    with engine.running_worker(concurrency=4):
        handles = [
            engine.start(sync_user, i, execution_id="sync-42", debounce=0.4) for i in range(50)
        ]
        last_start = time.monotonic()
        assert handles[0].created and not any(h.created for h in handles[1:])
        assert engine.store.get("sync-42").status is Status.PENDING  # type: ignore[union-attr]
        assert handles[-1].result(timeout=10) == 49
        waited = time.monotonic() - last_start
    assert runs == [49]
    assert waited >= 0.3  # it ran about `debounce` after the last start, not the first
    # Once it ran, a start of the same id returns it as it is.
    again = engine.start(sync_user, 7, execution_id="sync-42", debounce=0.4)
    assert not again.created and again.result(timeout=1) == 49


def test_the_command_line_starts_with_debounce(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from raftflow.engine.ops.cli import main
    from raftflow.engine.ops.cli.exits import Exit

    url = f"sqlite:///{tmp_path}/cli.db"
    base = ["start", "approval", "--app", "tests.apps.ops:engine", "--id", "d1", "--url", url]
    first, second = '{"id": "o1", "amount": 1}', '{"id": "o1", "amount": 2}'
    assert main([*base[:2], first, *base[2:], "--debounce", "30"]) == 0
    assert main([*base[:2], second, *base[2:], "--debounce", "30"]) == 0
    assert capsys.readouterr().out.split("\n")[:2] == ["d1", "d1 (already existed)"]
    with Engine.from_url(url) as engine:
        record = engine.store.get("d1")
        assert record is not None and record.input["amount"] == 2  # folded: the last input
    assert main([*base[:2], first, *base[2:4], "--debounce", "30", "--url", url]) == Exit.USAGE


def test_debounce_bad_input_is_refused(engine: Engine) -> None:
    @engine.workflow
    def wf(n: int) -> int:
        return n

    @engine.workflow(concurrency=1)
    def capped(n: int) -> int:
        return n

    for bad in (-1.0, 0, float("nan"), float("inf"), True, "2"):
        with pytest.raises(InvalidArgumentError, match="debounce"):
            engine.start(wf, 1, execution_id="x", debounce=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="execution_id"):
        engine.start(wf, 1, debounce=1.0)
    with pytest.raises(InvalidArgumentError, match="concurrency limit"):
        engine.start(capped, 1, execution_id="y", debounce=1.0)
    assert engine.list() == []


def wait_for(predicate: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
    return value


# --- rate limits ---------------------------------------------------------------------------


def starts_per_window(times: list[float], window: float, slack: float) -> int:
    """The most starts in any ``window`` seconds (less ``slack``, for a start's jitter)."""
    times = sorted(times)
    end = window - slack - 1e-9
    return max(sum(1 for u in times[i:] if u < t + end) for i, t in enumerate(times))


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_rate_limited_step_starts_at_most_n_per_period(engine: Engine, kind: str) -> None:
    from raftflow import RateLimit

    times: dict[str, float] = {}
    limit = RateLimit(5, per=0.5)

    def started() -> None:
        info = current_step()
        times[f"{info.execution_id}:{info.index}:{info.attempt}"] = time.time()

    if kind == "sync":

        @engine.step(rate_limit=limit)
        def call_api(n: int) -> int:
            started()
            return n

        @engine.workflow
        def wf(n: int) -> int:
            return call_api(n) + call_api(n + 100)

    else:

        @engine.step(rate_limit=limit)
        async def call_api(n: int) -> int:
            started()
            return n

        @engine.workflow
        async def wf(n: int) -> int:
            return await call_api(n) + await call_api(n + 100)

    with engine.running_worker(concurrency=16):
        handles = [engine.start(wf, i) for i in range(15)]
        assert [h.result(timeout=30) for h in handles] == [2 * i + 100 for i in range(15)]
    assert len(times) == 30
    reserved = read(engine, "SELECT token, at FROM rate_slots ORDER BY at")
    # The time each start used: its attempt's last reservation (a late start reserves again).
    slots = {":".join(r["token"].split(":")[:3]): r["at"] for r in reserved}
    assert slots.keys() == times.keys()
    # The reserved start times: never more than 5 in any 0.5 s; each step started at or
    # after its own (a little after: the worker's work between reservation and call).
    assert starts_per_window([r["at"] for r in reserved], 0.5, slack=0.0) <= 5
    assert all(times[token] >= at - 0.005 for token, at in slots.items())
    assert starts_per_window(list(times.values()), 0.5, slack=0.2) <= 5
    elapsed = max(slots.values()) - min(slots.values())
    assert elapsed >= 2.5, elapsed  # 30 starts at 5 per 0.5 s (how much longer: the load's)


def test_a_rate_limit_key_limits_each_key_apart_and_a_long_wait_parks(engine: Engine) -> None:
    from raftflow import RateLimit

    times: dict[str, list[float]] = {"a": [], "b": []}

    @engine.step(rate_limit=RateLimit(1, per=2.5, key=lambda customer: customer))
    def notify(customer: str) -> str:
        times[customer].append(time.time())
        return customer

    @engine.workflow
    def wf(customer: str) -> str:
        return notify(customer)

    with engine.running_worker(concurrency=8) as worker:
        handles = [engine.start(wf, c) for c in "abab"]
        for handle in handles:
            handle.result(timeout=30)
    for customer in "ab":
        first, second = times[customer]
        assert second - first >= 2.5 - 0.05
    # The keys did not wait for each other: b's first reservation was not pushed the 2.5 s
    # past a's that one shared key would give it (the reserved times, not the run times).
    firsts = {
        r["key"]: r["at"]
        for r in reversed(read(engine, "SELECT key, at FROM rate_slots ORDER BY at"))
    }
    assert abs(firsts["notify:a"] - firsts["notify:b"]) < 2.5 - 0.05, firsts
    # The 1.5 s waits parked (and came back by a claim, or a kept continuation).
    assert worker.stats.claimed + worker.stats.resumed >= 2
    rows = read(engine, "SELECT key, COUNT(*) AS n FROM rate_slots GROUP BY key ORDER BY key")
    assert rows == [{"key": "notify:a", "n": 2}, {"key": "notify:b", "n": 2}]


def test_bad_rate_limits_are_refused(engine: Engine) -> None:
    from raftflow import RateLimit

    for bad in (0, -1, True, 2.5):
        with pytest.raises(InvalidArgumentError, match="rate limit"):
            RateLimit(bad)  # type: ignore[arg-type]
    for per in (0, -1.0, float("nan"), "1"):
        with pytest.raises(InvalidArgumentError, match="per"):
            RateLimit(1, per=per)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="key"):
        RateLimit(1, key=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="RateLimit"):
        engine.step(rate_limit=10)(lambda: None)  # type: ignore[arg-type]


def test_a_late_copy_of_an_earlier_debounced_start_does_not_fold_back_in(engine: Engine) -> None:
    """A start's request that timed out is sent again, and the first copy may still arrive
    after a later start folded in (found by tests/sim). It must change nothing: not the
    input (the last start's wins), not the first event's wait (its end already past)."""
    from raftflow.engine.workflow.events import RUN_TEXT
    from raftflow.stores.flows import QUERIES
    from raftflow.stores.rows import start_params
    from raftflow.transports.db.flow import single

    @engine.workflow
    def folded(n: int) -> int:
        return n

    def start(now: float, n: int) -> None:
        params = start_params(
            "fold-1", "folded", str(n), 0, RUN_TEXT, now, f"c{n}", debounce_until=now + 30
        )
        engine.store.database.run(single(Request((QUERIES("start", params),))))

    start(1000.0, 1)
    start(1005.0, 2)  # folds in: input 2, runs at 1035
    start(1000.0, 1)  # the first start's late copy (its retry applied already)
    record = engine.store.get("fold-1")
    assert record is not None and record.input == 2
    (expiry,) = engine.store.database.run(
        single(Request((Statement("q", "SELECT lock_expiry FROM messages"),)))
    )[0].rows[0]
    assert expiry == 1035.0
    start(1005.0, 3)  # a start at the same time (a clock held still) still folds in
    assert engine.store.get("fold-1").input == 3  # type: ignore[union-attr]


def test_a_queues_limit_holds_across_its_workflows(engine: Engine) -> None:
    """``engine.limit_queue``: at most N executions of the queue's workflows at once,
    whichever workflow; another queue's executions are not counted."""
    tracker = Tracker()
    engine.limit_queue("billing", concurrency=2)

    @engine.step
    def work(job: Job) -> int:
        tracker.enter(job)
        time.sleep(0.03)
        tracker.leave(job)
        return job.n

    @engine.workflow(queue="billing")
    def invoice(job: Job) -> int:
        work(job)
        engine.sleep(0.05)  # the slot is kept while it sleeps
        return work(job)

    @engine.workflow(queue="billing")
    def refund(job: Job) -> int:
        return work(job)

    @engine.workflow
    def free(job: Job) -> int:  # the default queue: no limit
        return job.n

    billing = [
        engine.start(wf, Job(customer="a", n=i)) for i in range(4) for wf in (invoice, refund)
    ]
    others = [engine.start(free, Job(customer="b", n=i)) for i in range(4)]
    with engine.running_worker(concurrency=8):
        assert sorted(h.result(timeout=30) for h in billing) == sorted([*range(4), *range(4)])
        assert [h.result(timeout=30) for h in others] == list(range(4))
    assert tracker.peak["*"] <= 2
    rows = read(engine, "SELECT DISTINCT workflow, limit_key, limit_max FROM executions")
    assert sorted((r["workflow"], r["limit_key"], r["limit_max"]) for r in rows) == [
        ("free", None, None),
        ("invoice", "queue:billing", 2),
        ("refund", "queue:billing", 2),
    ]


def test_a_limited_workflow_cannot_be_in_a_limited_queue(engine: Engine) -> None:
    engine.limit_queue("billing", concurrency=2)
    with pytest.raises(ConfigurationError, match="one limit"):

        @engine.workflow(queue="billing", concurrency=1)
        def both(n: int) -> int:
            return n

    @engine.workflow(queue="reports", concurrency=1)
    def report(n: int) -> int:
        return n

    with pytest.raises(ConfigurationError, match="one limit"):
        engine.limit_queue("reports", concurrency=3)
    with pytest.raises(ConfigurationError):
        engine.limit_queue("billing", concurrency=0)


def test_a_queues_rate_limit_spaces_the_starts_of_its_executions(engine: Engine) -> None:
    """``limit_queue(rate=RateLimit(2, per=0.5))``: each execution's start is reserved (at
    most 2 in any 0.5 s, in claim order) and its first call runs no earlier; its history
    holds only its own calls."""
    engine.limit_queue("burst", rate=RateLimit(2, per=0.5))

    @engine.step
    def begin(n: int) -> int:
        return n

    @engine.workflow(queue="burst")
    def bursty(n: int) -> int:
        return begin(n)

    handles = [engine.start(bursty, n) for n in range(6)]
    with engine.running_worker(concurrency=8):
        assert [h.result(timeout=30) for h in handles] == list(range(6))
    slots = read(engine, "SELECT token, at FROM rate_slots WHERE key = 'queue:burst'")
    at = {row["token"]: row["at"] for row in slots}
    assert sorted(at) == sorted(h.id for h in handles)
    times = sorted(at.values())
    assert all(later - earlier >= 0.5 - 1e-6 for earlier, later in zip(times, times[2:]))
    for handle in handles:
        (step,) = handle.steps()  # nothing recorded for the wait
        assert step.name == "begin" and step.started_at >= at[handle.id]
