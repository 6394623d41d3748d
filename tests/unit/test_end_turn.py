"""The end of a turn reaches the worker's loop from either side: from an async run on the
loop itself (without waking the loop through its self-pipe) and from a sync run's thread."""

from __future__ import annotations

import asyncio
import functools
import threading
from types import SimpleNamespace
from typing import Any

from raftflow.engine.workflow.activation import Activation


def _run_of(loop: asyncio.AbstractEventLoop) -> Any:
    """An object with what :meth:`Activation.end_turn` uses: its host's loop, its turn."""
    run = SimpleNamespace(host=SimpleNamespace(loop=loop), turn=loop.create_future())
    run._end_turn = functools.partial(Activation._end_turn, run)
    return run


def test_an_async_runs_end_of_turn_is_told_on_the_loop_without_its_self_pipe() -> None:
    async def scenario() -> tuple[str, list[str], int]:
        loop = asyncio.get_running_loop()
        run = _run_of(loop)
        order: list[str] = []
        writes = 0
        write_to_self = loop._write_to_self  # type: ignore[attr-defined]

        def counted() -> None:
            nonlocal writes
            writes += 1
            write_to_self()

        loop._write_to_self = counted  # type: ignore[attr-defined]
        loop.call_soon(order.append, "scheduled before")
        Activation.end_turn(run, "done")
        run.turn.add_done_callback(lambda _: order.append("turn over"))
        assert not run.turn.done()  # told through the loop, as call_soon_threadsafe does
        how = await run.turn
        return how, order, writes

    how, order, writes = asyncio.run(scenario())
    assert how == "done"
    assert order == ["scheduled before", "turn over"]
    assert writes == 0


def test_a_sync_runs_end_of_turn_from_its_thread_wakes_the_loop() -> None:
    async def scenario() -> str:
        run = _run_of(asyncio.get_running_loop())
        thread = threading.Thread(target=Activation.end_turn, args=(run, "suspended"))
        thread.start()
        try:
            # Nothing else is scheduled: only the thread's wake-up ends this wait.
            return str(await asyncio.wait_for(run.turn, 10.0))
        finally:
            thread.join()

    assert asyncio.run(scenario()) == "suspended"
