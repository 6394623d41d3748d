"""The simulator's harness itself: what fails inside a simulated run is never swallowed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from raftflow.engine.runtime import dispatch as dispatch_module
from raftflow.engine.workflow import drivers as drivers_module

from tests.sim.loop import SimLoop
from tests.sim.sim import Simulation, run_seed


def test_the_loop_keeps_what_failed_and_nobody_handled() -> None:
    loop = SimLoop()

    async def fails(what: str) -> None:
        await asyncio.sleep(1.0)
        raise RuntimeError(what)

    async def main() -> None:
        loop.create_task(fails("left alone"))
        awaited = loop.create_task(fails("awaited"))
        loop.create_task(asyncio.sleep(5.0)).cancel()
        loop.call_later(2.0, lambda: 1 / 0)
        with pytest.raises(RuntimeError):
            await awaited
        await asyncio.sleep(3.0)

    loop.run_until_complete(main())
    found = loop.unexpected()
    loop.close()
    assert len(found) == 2, found
    assert "ZeroDivisionError" in found[0]
    assert "fails failed: RuntimeError: left alone" in found[1]
    assert loop.unexpected() == []  # each reported once


def test_an_exception_escaping_a_workers_task_fails_the_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An async workflow's run task that ends in an exception (an engine bug: nobody
    awaits those tasks) is a violation of the seed, not a silent loss."""
    original = dispatch_module.run_async

    async def run_then_fail(activation: Any) -> None:
        await original(activation)
        raise RuntimeError("planted: the run task failed")

    monkeypatch.setattr(dispatch_module, "run_async", run_then_fail)
    result = run_seed(1)  # a seed with an async run task that ends (seed 0's none since lanes)
    planted = [v for v in result.violations if "planted: the run task failed" in v]
    assert planted, result.violations
    assert planted[0].startswith("unhandled in the simulation: task "), planted[0]
    assert "run_then_fail failed: RuntimeError" in planted[0], planted[0]


#: A seed whose retry fires early with the early-timers mutation (its reference unmoved):
#: 12 since the sharded deployments' relay changed the seeds' runs (27, and 5 before).
EARLY_RETRY_SEED = 12


def test_a_timer_may_be_early_only_by_what_its_own_reference_moved() -> None:
    """The timer checks' slack is how far the reference moved between setting and
    honouring each timer (tests/sim/timers.py), not the seed's configured clock jumps.
    A worker's clock jump of 300 s planned after the run ends (it never happens) made the
    old slack 300 s for every timer of the seed: timers planted to fire early (on the
    clock's midpoint, not its bounds) went unseen. Nothing moved: caught."""
    sim = Simulation(EARLY_RETRY_SEED, mutation="early-timers")
    sim.plan.clock_jumps = [(100_000.0, 0, 300.0)]  # configured, never reached
    result = sim.run()
    early = [v for v in result.violations if "attempt 2 started" in v]
    assert early, f"seed {EARLY_RETRY_SEED} no longer catches early-timers: {result.violations}"
    assert "slack 0.0000s" in early[0], early
    assert not run_seed(EARLY_RETRY_SEED).violations


def test_a_bug_on_the_sync_path_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sync workflows run in the simulation (tests/sim/threads.py): a sync step whose
    function the engine calls twice -- its side effect repeated -- is caught within a few
    seeds (before they ran, no seed could catch a bug of that path)."""
    original = drivers_module._call_step

    def twice(run: Any, command: Any) -> Any:
        if command.info.name == "swork":
            original(run, command)
        return original(run, command)

    monkeypatch.setattr(drivers_module, "_call_step", twice)
    for seed in range(10):
        result = run_seed(seed)
        if result.violations:
            assert any("ran twice under one lease" in v for v in result.violations), result
            return
    pytest.fail("no seed of 0-9 caught a sync step run twice")
