"""Cron schedules without a server: the spec's validation at decoration time, the fire
times (due, catch-up, next) and the ids, and the reserved group prefix."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from raftflow.engine.workflow.schedule import Schedule, parse_schedule_event

from raftflow import Engine
from raftflow.errors import ConfigurationError, InvalidArgumentError

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("cron", "zone", "catch_up"),
    [
        ("not a cron", "UTC", 1),
        ("* * * *", "UTC", 1),
        ("* * * * * * *", "UTC", 1),
        ("61 * * * *", "UTC", 1),
        (5, "UTC", 1),
        ("* * * * *", "Mars/Olympus", 1),
        ("* * * * *", "", 1),
        ("* * * * *", "UTC", -1),
        ("* * * * *", "UTC", True),
        ("* * * * *", "UTC", 10_000),
    ],
)
def test_a_bad_spec_fails_at_decoration(cron: object, zone: object, catch_up: object) -> None:
    engine = Engine(url="sqlite://")
    with pytest.raises(InvalidArgumentError):
        engine.scheduled(cron, timezone=zone, catch_up=catch_up)  # type: ignore[arg-type]


def test_the_workflow_must_take_the_scheduled_time() -> None:
    engine = Engine(url="sqlite://")
    with pytest.raises(ConfigurationError, match="datetime"):

        @engine.scheduled("*/5 * * * *")
        def wrong(count: int) -> None: ...

    @engine.scheduled("*/5 * * * *", timezone="Europe/Paris", catch_up=0)
    def report(at: datetime) -> None: ...

    expected = Schedule("report", "*/5 * * * *", "Europe/Paris", 0, lane="default/report")
    assert engine.schedules["report"] == expected
    assert "report" in engine.registry.workflows  # registered as a workflow too

    @engine.scheduled("0 * * * *", queue="billing")
    def invoice(at: datetime) -> None: ...

    assert engine.schedules["invoice"].lane == "billing/invoice"  # fired in its queue


def test_due_times_the_latest_and_up_to_catch_up_missed_ones() -> None:
    every_minute = Schedule("job", "* * * * *", catch_up=2)
    assert every_minute.due(T0, T0 + 0.4) == ([T0], False)  # on time
    assert every_minute.due(T0, T0 - 0.5) == ([], False)  # early: nothing yet
    assert every_minute.due(T0, T0 + 130) == ([T0, T0 + 60, T0 + 120], False)
    # Down for ten minutes: the latest and 2 before it; the older ones are skipped.
    assert every_minute.due(T0, T0 + 600) == ([T0 + 480, T0 + 540, T0 + 600], True)
    assert Schedule("job", "* * * * *", catch_up=0).due(T0, T0 + 600) == ([T0 + 600], True)
    assert every_minute.next_after(T0) == T0 + 60
    assert every_minute.next_after(T0 + 59.9) == T0 + 60
    assert every_minute.next_times(T0, 2) == [T0 + 60, T0 + 120]
    seconds = Schedule("job", "*/10 * * * * *")  # six fields: seconds first
    assert seconds.next_after(T0 + 1) == T0 + 10


def test_ids_and_inputs_are_the_time_in_the_schedule_zone() -> None:
    paris = Schedule("report", "0 9 * * *", timezone="Europe/Paris")
    at = paris.next_after(T0)  # 09:00 in Paris, 08:00 UTC in March
    assert paris.execution_id(at) == "report@2026-03-02T09:00:00+01:00"
    assert paris.when(at).hour == 9
    # Across the spring DST change the wall-clock time stays 09:00 (now +02:00).
    later = paris.next_after(datetime(2026, 3, 30, tzinfo=timezone.utc).timestamp())
    assert paris.execution_id(later) == "report@2026-03-30T09:00:00+02:00"
    event = parse_schedule_event(paris.event(at))
    assert event is not None and event.at == at and event.cron == "0 9 * * *"
    assert parse_schedule_event({"kind": "run"}) is None


def test_engine_group_ids_are_reserved(tmp_path: Path) -> None:
    engine = Engine(url=f"sqlite:///{tmp_path}/app.db")

    @engine.workflow
    def plain(x: int) -> int:
        return x

    with pytest.raises(InvalidArgumentError, match="reserved"):
        engine.start(plain, 1, execution_id="raftflow:schedule:plain")
    engine.close()


def test_a_schedule_claimed_early_fires_nothing_and_waits_for_the_same_time() -> None:
    """A claim a little before the parked time (the claimer's clock estimate ran ahead)
    starts nothing and parks the schedule for that same time, not the one after it."""
    from raftflow.engine.runtime.schedules import ScheduleFlows
    from raftflow.engine.workflow.registry import WorkflowDef
    from raftflow.transports.contract import Lease
    from raftflow.transports.db.clock import LocalClock

    def job(at: datetime) -> None: ...

    schedule = Schedule("job", "* * * * *")
    flows = ScheduleFlows(LocalClock(time_source=lambda: T0 - 0.3))
    lease = Lease(seq=1, group_id=schedule.group_id, event={}, token="t", expires_at=T0 + 30)
    flow = flows.fire(lease, schedule, WorkflowDef.of(job, None), "default/job@v1", T0)
    request = next(flow)
    params = request.statements[0].params
    assert isinstance(params, dict)
    assert params["starts"] == "[]" and params["next_at"] == T0


def test_a_changed_expression_reparks_the_schedule(tmp_path: Path) -> None:
    from raftflow.engine.testing import EPOCH, WorkflowTestEnvironment

    path = tmp_path / "app.db"
    old, new = Engine(), Engine()

    @old.scheduled("0 0 1 1 *")
    def report(at: datetime) -> None: ...

    with WorkflowTestEnvironment(old, schedules=True, path=path) as env:
        env.settle()
        (info,) = old.list_schedules()
        assert info.cron == "0 0 1 1 *" and info.next_at == EPOCH.timestamp() + 365 * 86400

    @new.scheduled("0 * * * *", catch_up=1)  # the next release: hourly
    def report(at: datetime) -> None:  # noqa: F811
        ...

    with WorkflowTestEnvironment(new, schedules=True, path=path) as env:
        env.settle()
        (info,) = new.list_schedules()
        assert (info.cron, info.catch_up) == ("0 * * * *", 1)
        assert info.next_at == EPOCH.timestamp() + 3600
        env.advance(3600)
        assert [r.id for r in new.list()] == ["report@2030-01-01T01:00:00+00:00"]


def test_retention_must_be_a_positive_timedelta() -> None:
    from datetime import timedelta

    assert Engine(retention=None).retention is None
    assert Engine().retention == timedelta(days=30)
    for bad in (timedelta(0), timedelta(days=-1), 30):
        with pytest.raises(ConfigurationError, match="retention"):
            Engine(retention=bad)  # type: ignore[arg-type]


def test_retention_share_must_be_a_fraction() -> None:
    from raftflow.engine.runtime.worker import WorkerOptions

    assert WorkerOptions().retention_share == 0.05 and WorkerOptions().retention_batch == 50
    assert WorkerOptions(retention_share=1).retention_share == 1
    for bad in (0, -0.1, 1.5, "0.1", True, float("nan")):
        with pytest.raises(InvalidArgumentError, match="retention_share"):
            WorkerOptions(retention_share=bad)  # type: ignore[arg-type]


def test_retention_paces_its_batches_to_its_share_of_time() -> None:
    """After a batch whose request took t, the holder waits t * (1/share - 1): the
    deletes take ``retention_share`` of the time; none while its slots are busy."""
    import asyncio
    import itertools
    import time
    from datetime import timedelta
    from types import SimpleNamespace
    from typing import Any

    from raftflow.engine.runtime.retention import Retention
    from raftflow.engine.runtime.worker import WorkerOptions
    from raftflow.transports.db.clock import LocalClock

    took, batches = 0.05, [10, 10, 10, 4]
    starts: list[float] = []

    async def run(flow: Any) -> int:
        starts.append(time.monotonic())
        await asyncio.sleep(took)
        return batches[len(starts) - 1]

    options = WorkerOptions(retention_batch=10, retention_share=0.2, retention_pause=0.01)
    store: Any = SimpleNamespace(run=run, clock=LocalClock())
    running = [0]
    worker: Any = SimpleNamespace(
        options=options, worker_id="w", running=lambda: running[0], draining=lambda: False
    )
    retention = Retention(worker, store, timedelta(days=1))
    retention.held = True
    asyncio.run(retention.drain())
    assert retention.deleted == 34 and len(starts) == 4  # the short batch is the last
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(gap >= took + took * (1 / 0.2 - 1) - 0.01 for gap in gaps), gaps

    async def busy() -> None:
        running[0] = options.concurrency // 2 + 1
        task = asyncio.create_task(retention.drain())
        await asyncio.sleep(0.2)
        assert starts == []  # no batch while more than half of the slots run
        running[0] = 0
        await asyncio.wait_for(task, 2)

    starts.clear()
    batches[:] = [3]
    asyncio.run(busy())
    assert len(starts) == 1


def test_a_worker_whose_lease_lapsed_cannot_fire_again(tmp_path: Path) -> None:
    """Two workers claim the schedule in turn (the first one's lease lapsed): the second
    fires the time; the first one's late fire is refused whole -- it starts nothing and
    does not re-park the schedule."""
    from raftflow.engine.runtime.schedules import ScheduleFlows
    from raftflow.engine.testing import VirtualClock

    clock = VirtualClock(T0 - 10)
    engine = Engine.from_url(f"sqlite:///{tmp_path}/app.db", clock=clock)

    @engine.scheduled("* * * * *")
    def job(at: datetime) -> None: ...

    store, transport = engine.store, engine.transport
    flows = ScheduleFlows(clock)
    schedule, definition = engine.schedules["job"], engine.registry.workflows["job"]
    store.run(flows.ensure([schedule]))
    clock.set(T0 + 1)
    (first,) = store.claim(transport, "a", 5.0)
    clock.set(T0 + 10)  # a's lease lapsed; b claims the same message
    (second,) = store.claim(transport, "b", 5.0)
    assert first.lease.seq == second.lease.seq and first.lease.token != second.lease.token
    outcome = store.run(flows.fire(second.lease, schedule, definition, "default/job@v1", T0))
    assert outcome.applied and outcome.started == [schedule.execution_id(T0)]
    clock.set(T0 + 61)  # a wakes up after the next time came due
    late = store.run(flows.fire(first.lease, schedule, definition, "default/job@v1", T0))
    assert not late.applied
    assert [r.id for r in engine.list()] == ["job@2026-03-01T12:00:00+00:00"]
    (info,) = engine.list_schedules()
    assert info.next_at == T0 + 60 and not info.firing
    engine.close()
