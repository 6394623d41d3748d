"""The cluster clock's error bound, and claims that never take a lease over early.

Found by the deterministic simulator (tests/sim, seeds 241 and 307 before the fix): a worker
stalled during its clock sync (SIGSTOP, a GC pause, a crawling network) anchors the leader's
time at the middle of an inflated round trip, so its ``now()`` runs ahead by up to half of it;
its claims then took over other workers' live leases that early -- two workers running one
execution's steps at once, each believing it held the lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from raftflow.engine.workflow.events import RUN
from raftflow.stores.flows import StoreFlows
from raftflow.transports.db.clock import ClusterClock, LocalClock, earliest, earliest_estimate
from raftflow.transports.db.flow import Flow, Request, Response, Result, run_flow
from raftflow.transports.db.schema import ensure
from raftflow.transports.queue import QUERIES, QueueFlows
from raftflow.transports.sqlite.connection import SqliteConnection


def _answer(flow: Flow[float], leader_time: float) -> float:
    """Run a clock flow, answering its sync (if any) with ``leader_time``."""
    try:
        request = next(flow)
        while True:
            result = Result(columns=("now",), rows=((leader_time,),))
            request = flow.send(Response(request, (result,)))
    except StopIteration as stop:
        value: float = stop.value
        return value


def test_a_stalled_sync_puts_now_ahead_but_never_earliest() -> None:
    # Local time: 0 when the sync is sent; the process then stalls 2 s; the leader answers
    # (its clock reads 1000 + 2) right before the reply is read at local 2.
    ticks: Iterator[float] = iter([0.0, 0.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    clock = ClusterClock(QUERIES("clock"), local_time=lambda: next(ticks))
    true_now = 1002.0
    assert _answer(clock.now(), 1002.0) == 1003.0  # the midpoint estimate: 1 s ahead
    assert clock.uncertainty == 1.0
    assert _answer(clock.earliest(), 1002.0) <= true_now


def test_a_held_estimate_never_makes_a_timer_pass_early() -> None:
    """Seed 1617 of tests/sim: a slow sync puts the estimate 0.5 s ahead; a precise sync
    later cannot move it back (never backwards). When a timer has surely passed is
    ``earliest_estimate()`` -- the sync's reading less its uncertainty, not held -- where
    ``estimate - uncertainty`` was 0.4 s early."""
    local = [0.0]
    clock = ClusterClock(QUERIES("clock"), resync=1.0, local_time=lambda: local[0])

    def sync(sent: float, answered: float, leader: float) -> None:
        flow = clock.now()
        local[0] = sent
        request = next(flow)
        local[0] = answered
        with pytest.raises(StopIteration):
            flow.send(Response(request, (Result(columns=("now",), rows=((leader,),)),)))

    # True time = 1000 + local time; the leader reads 1001 when answering at local 1.0.
    sync(0.0, 1.0, 1001.0)  # a 1 s round trip: anchored at its midpoint, 0.5 s ahead
    assert clock.estimate() == 1001.5 and clock.uncertainty == 0.5
    local[0] = 2.9
    assert clock.estimate() == 1003.4  # read (a deadline set, a timer checked) just before
    sync(3.0, 3.002, 1003.002)  # precise: the anchor is right, the estimate held ahead
    true_now = 1003.002
    assert clock.estimate() > true_now + 0.3  # held: never backwards
    assert clock.uncertainty < 0.01
    assert clock.earliest_estimate() <= true_now  # what passed() and remaining() use
    assert earliest_estimate(clock) == clock.earliest_estimate()
    assert earliest_estimate(LocalClock(time_source=lambda: 5.0)) == 5.0


def test_earliest_of_a_clock_without_it_is_now() -> None:
    clock = LocalClock(time_source=lambda: 50.0)
    assert _answer(earliest(clock), 0.0) == 50.0


class _Ahead:
    """A worker's clock whose estimate runs 1 s ahead, and knows it may (uncertainty 1 s)."""

    def now(self) -> Flow[float]:
        return time.time() + 1.0
        yield  # pragma: no cover

    def earliest(self) -> Flow[float]:
        return time.time()
        yield  # pragma: no cover

    def estimate(self) -> float:
        return time.time() + 1.0


def test_a_claim_never_takes_over_a_live_lease_with_a_clock_ahead() -> None:
    connection = SqliteConnection(":memory:")
    run_flow(connection, ensure(True))
    holder, taker = QueueFlows(LocalClock()), QueueFlows(_Ahead())  # type: ignore[arg-type]
    run_flow(connection, holder.publish("g", {"n": 1}))
    held = run_flow(connection, holder.claim("a", visibility=0.5)).leases
    assert len(held) == 1
    # Live for 0.5 s more on the reference clock; the taker's estimate says it lapsed.
    assert run_flow(connection, taker.claimable()) is False
    assert run_flow(connection, taker.claim("b", visibility=5.0)).leases == []
    time.sleep(0.6)  # now it has lapsed for real
    (taken,) = run_flow(connection, taker.claim("b", visibility=5.0)).leases
    assert taken.group_id == "g" and taken.token.startswith("b:")
    connection.close()


def test_request_shape_is_unchanged() -> None:
    # earliest() syncs like now(): one weak read of the clock query when due.
    clock = ClusterClock(QUERIES("clock"), local_time=lambda: 0.0)
    flow = clock.earliest()
    request = next(flow)
    assert isinstance(request, Request) and request.level == "weak"
    assert request.statements[0].sql == QUERIES("clock").sql


def test_a_sync_across_a_local_clock_going_back_is_not_taken() -> None:
    """Seed 1527 of tests/sim: the local clock went back 111 s while a sync was in flight;
    its "round trip" was negative, and so was the uncertainty taken from it, which put a
    7 s sleep's wake time 49 s in the past. Such a sync is dropped and made again."""
    # First sync: sent at local 100, read at 100.002 (leader 1000). The next one is sent
    # at 131 (due), the clock goes back 111 s before its reply is read (local 20); the
    # next call syncs again, sent and read at 20.002 (leader 1031.5).
    ticks: Iterator[float] = iter([100.0, 100.0, 100.002, 100.002, 131.0, 131.0, 20.0])
    replies = iter([1000.0, 1031.0, 1031.5])
    more = iter([20.0] + [20.002] * 10)
    clock = ClusterClock(QUERIES("clock"), local_time=lambda: next(ticks, None) or next(more))

    def answer(flow: Flow[float]) -> float:
        try:
            request = next(flow)
            while True:
                result = Result(columns=("now",), rows=((next(replies),),))
                request = flow.send(Response(request, (result,)))
        except StopIteration as stop:
            value: float = stop.value
            return value

    answer(clock.now())
    assert clock.uncertainty == pytest.approx(0.001)
    dropped = answer(clock.now())  # the sync across the jump: not taken, the time held
    assert dropped == pytest.approx(1000.001) and clock.uncertainty == pytest.approx(0.001)
    again = answer(clock.now())  # synced again at once
    assert again == pytest.approx(1031.5) and 0 <= clock.uncertainty <= 0.001
    assert earliest_estimate(clock) <= 1031.5


class _Behind:
    """A client's clock whose last sync was slow and lopsided: its estimate 0.5 s behind the
    reference, which its uncertainty (half that sync's round trip) allows."""

    uncertainty = 0.5

    def __init__(self, reference: Callable[[], float]) -> None:
        self.reference = reference

    def now(self) -> Flow[float]:
        return self.reference() - 0.5
        yield  # pragma: no cover

    def earliest(self) -> Flow[float]:
        return self.reference() - 1.0
        yield  # pragma: no cover

    def estimate(self) -> float:
        return self.reference() - 0.5


def test_a_debounced_start_is_parked_its_debounce_on_the_reference_with_a_clock_behind() -> None:
    """Found by the simulator (seed 1914 of tests/sim's sharded seeds): a debounced start
    parked its event ``debounce`` after the starter's estimate, which a slow clock sync
    left behind the reference -- a precise worker claimed it 0.08 s early. The start now
    counts the estimate's uncertainty, as a workflow's timers do (Activation.after)."""
    reference = [1000.0]
    connection = SqliteConnection(":memory:")
    run_flow(connection, ensure(True))
    starter = StoreFlows(_Behind(lambda: reference[0]))  # type: ignore[arg-type]
    run_flow(connection, starter.start("d", "wf", {}, 0, RUN, debounce=1.0))
    worker = QueueFlows(LocalClock(time_source=lambda: reference[0]))
    reference[0] = 1000.9  # 0.9 s after the start, on the reference: not due yet
    assert run_flow(connection, worker.claim("w", visibility=5.0)).leases == []
    reference[0] = 1001.6  # past the debounce, however far the starter's estimate was off
    (claimed,) = run_flow(connection, worker.claim("w", visibility=5.0)).leases
    assert claimed.group_id == "d"
    connection.close()


def test_a_workflows_timeout_is_measured_from_the_reference_with_a_clock_behind() -> None:
    """The debounce's sibling: the deadline of a workflow's ``timeout`` was the starter's
    estimate plus the timeout, so with an estimate behind the reference the timeout cut the
    execution early (by up to the estimate's uncertainty) on a worker whose clock is precise."""
    reference = [1000.0]
    connection = SqliteConnection(":memory:")
    run_flow(connection, ensure(True))
    starter = StoreFlows(_Behind(lambda: reference[0]))  # type: ignore[arg-type]
    run_flow(connection, starter.start("t", "wf", {}, 0, RUN, timeout=1.0))
    record = run_flow(connection, starter.get("t"))
    assert record is not None and record.deadline is not None
    assert record.deadline >= 1000.0 + 1.0  # no earlier than a second after the start
    connection.close()
