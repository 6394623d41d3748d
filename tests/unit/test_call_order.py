"""CallOrder on its own (engine/workflow/callorder.py): a call that did not let the loop run
yields once only when a task of its run waits to start (a replay of a sequential workflow
costs no loop pass per call), and a cancel or an error passes through a call unchanged.
The replays of gathers that depend on it are in test_async_gather.py."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from raftflow.engine.workflow.callorder import CallOrder

RUN: contextvars.ContextVar[object | None] = contextvars.ContextVar("run", default=None)


class Unwind(Exception):
    pass


def order_of(run: object) -> CallOrder:
    return CallOrder(Unwind, lambda context: context.get(RUN) is run)


async def recorded(value: int) -> int:
    return value  # a replayed call: its result is known, nothing is awaited


def test_a_lone_replayed_call_does_not_yield() -> None:
    async def main() -> list[str]:
        run = object()
        RUN.set(run)
        calls, seen = order_of(run), []
        asyncio.get_running_loop().call_soon(seen.append, "the loop ran")
        for i in range(3):
            await calls.call(lambda i=i: recorded(i))
        seen.append("three calls done")
        await asyncio.sleep(0)
        return seen

    assert asyncio.run(main()) == ["three calls done", "the loop ran"]


def test_a_replayed_call_yields_while_a_task_of_its_run_waits_to_start() -> None:
    async def main() -> list[str]:
        run = object()
        RUN.set(run)
        calls, order = order_of(run), []

        async def branch(name: str) -> None:
            for i in range(2):
                await calls.call(lambda i=i: recorded(i))
                order.append(f"{name}{i}")

        await asyncio.gather(branch("a"), branch("b"))
        return order

    # Without the yield, "a" would replay both its calls before "b" took a ticket.
    assert asyncio.run(main()) == ["a0", "b0", "a1", "b1"]


def test_a_task_of_another_run_waiting_to_start_is_no_reason_to_yield() -> None:
    async def main() -> list[str]:
        run = object()
        RUN.set(run)
        calls, seen = order_of(run), []

        async def other_run() -> None:
            seen.append("the other run started")

        context = contextvars.copy_context()
        context.run(RUN.set, object())
        task = asyncio.get_running_loop().create_task(other_run(), context=context)
        await calls.call(lambda: recorded(1))
        seen.append("the call returned")
        await task
        return seen

    assert asyncio.run(main()) == ["the call returned", "the other run started"]


def test_a_cancel_and_an_error_pass_through_a_call() -> None:
    async def main() -> None:
        calls = order_of(object())
        started = asyncio.Event()

        async def waits() -> int:
            started.set()
            await asyncio.sleep(60)
            return 1

        task = asyncio.create_task(calls.call(waits))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async def fails() -> int:
            await asyncio.sleep(0)
            raise ValueError("the step failed")

        with pytest.raises(ValueError, match="the step failed"):
            await calls.call(fails)
        assert await calls.call(lambda: recorded(7)) == 7  # the turn was handed on each time

    asyncio.run(main())
