"""The simulator's harness itself: what fails inside a simulated run is never swallowed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from raftflow.engine import session as session_module

from tests.sim.loop import SimLoop
from tests.sim.sim import run_seed


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
    original = session_module.run_async

    async def run_then_fail(activation: Any) -> None:
        await original(activation)
        raise RuntimeError("planted: the run task failed")

    monkeypatch.setattr(session_module, "run_async", run_then_fail)
    result = run_seed(0)
    planted = [v for v in result.violations if "planted: the run task failed" in v]
    assert planted, result.violations
    assert planted[0].startswith("unhandled in the simulation: task "), planted[0]
    assert "run_then_fail failed: RuntimeError" in planted[0], planted[0]
