"""Concurrency inside an async workflow: asyncio.gather over durable calls.

The calls of a gather take their positions in the order gather starts them and run one
after another (engine/workflow/callorder.py), so the history is the same in every run and every
replay: fan-out/fan-in over children (which run in parallel), a gather over steps, a
gather of coroutines that each start a child and wait for it. Before, a gather over
children's ``result_async()`` hung for ever and a gather over steps failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftflow import Engine, StepError, WorkflowFailedError
from tests.support import wait_until


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'gather.db'}")
    yield engine
    engine.close()


class App:
    """Children that double their input in a step (each run of it noted), and parents
    that gather over them."""

    def __init__(self, engine: Engine) -> None:
        self.runs: list[int] = []

        @engine.step
        async def double(n: int) -> int:
            self.runs.append(n)
            await asyncio.sleep(0.001)  # a step that awaits something, as steps do
            return n * 2

        @engine.step
        def triple(n: int) -> int:  # a sync step: it runs in a thread
            self.runs.append(n)
            return n * 3

        @engine.workflow
        async def child(n: int) -> int:
            return await double(n)

        @engine.workflow
        async def fan_in(n: int) -> list[int]:
            handles = [await engine.start_async(child, i) for i in range(n)]
            return list(await asyncio.gather(*(h.result_async() for h in handles)))

        @engine.workflow
        async def fan_out_and_in(n: int) -> list[int]:
            handles = await asyncio.gather(*(engine.start_async(child, i) for i in range(n)))
            return list(await asyncio.gather(*(h.result_async() for h in handles)))

        async def start_and_wait(i: int) -> int:
            handle = await engine.start_async(child, i)
            return int(await handle.result_async())

        @engine.workflow
        async def each_in_one(n: int) -> list[int]:
            return list(await asyncio.gather(*(start_and_wait(i) for i in range(n))))

        @engine.workflow
        async def steps(n: int) -> list[int]:
            doubled = await asyncio.gather(*(double(i) for i in range(n)))
            tripled = await asyncio.gather(*(triple(i) for i in range(n)))
            return [*doubled, *tripled]

        self.fan_in, self.fan_out_and_in = fan_in, fan_out_and_in
        self.each_in_one, self.steps = each_in_one, steps
        self.double, self.triple = double, triple


def calls(handle: Any) -> list[tuple[str, str]]:
    return [(s.kind, s.name) for s in handle.steps()]


def test_gather_over_children_results_returns_every_result(engine: Engine) -> None:
    app = App(engine)
    handle = engine.start(app.fan_in, 20)
    with engine.running_worker(concurrency=8):
        assert handle.result(timeout=30) == [2 * i for i in range(20)]
    children = [f"{handle.id}/{i}" for i in range(20)]
    assert calls(handle) == [("child", "child")] * 20 + [("wait", c) for c in children]
    assert sorted(app.runs) == list(range(20))  # each child's step ran once


def test_gather_over_child_starts_and_over_coroutines_of_two_calls(engine: Engine) -> None:
    app = App(engine)
    with engine.running_worker(concurrency=8):
        both = engine.start(app.fan_out_and_in, 5)
        each = engine.start(app.each_in_one, 5)
        assert both.result(timeout=30) == [0, 2, 4, 6, 8]
        assert each.result(timeout=30) == [0, 2, 4, 6, 8]
    for handle in (both, each):  # the starts in argument order, then the waits
        waits = [("wait", f"{handle.id}/{i}") for i in range(5)]
        assert calls(handle) == [("child", "child")] * 5 + waits


def test_gather_over_steps_records_them_in_argument_order(engine: Engine) -> None:
    app = App(engine)
    handle = engine.start(app.steps, 10)
    expected = [2 * i for i in range(10)] + [3 * i for i in range(10)]
    with engine.running_worker():
        assert handle.result(timeout=30) == expected
    assert [s.output for s in handle.steps()] == expected
    assert app.runs == [*range(10), *range(10)]  # one at a time, each once


def test_a_replay_of_a_gather_of_two_step_coroutines_meets_the_same_positions(
    engine: Engine,
) -> None:
    """A fork from the last call replays every call before it from its record (no I/O:
    each call yields to the loop once, as the first run's I/O made it): the same order."""
    app = App(engine)

    async def both(i: int) -> int:
        return int(await app.triple(await app.double(i)))

    @engine.workflow
    async def pairs(n: int) -> list[int]:
        return list(await asyncio.gather(*(both(i) for i in range(n))))

    with engine.running_worker():
        first = engine.start(pairs, 5)
        assert first.result(timeout=30) == [6 * i for i in range(5)]
        outputs = [s.output for s in first.steps()]
        assert outputs == [2 * i for i in range(5)] + [6 * i for i in range(5)]
        fork = engine.fork(first.id, from_step=len(outputs) - 1)
        assert fork.result(timeout=30) == [6 * i for i in range(5)]
    assert [s.output for s in fork.steps()] == outputs
    assert app.runs == [*range(5), *(2 * i for i in range(5)), 8]  # only the last re-ran


def test_a_failing_call_in_a_gather_fails_the_workflow_without_a_hang(engine: Engine) -> None:
    ran: list[int] = []

    @engine.step
    async def check(n: int) -> int:
        ran.append(n)
        if n == 1:
            raise ValueError("one is bad")
        return n

    @engine.workflow
    async def checks() -> list[int]:
        return list(await asyncio.gather(check(0), check(1), check(2), check(3)))

    handle = engine.start(checks)
    with engine.running_worker(), pytest.raises(WorkflowFailedError, match="one is bad"):
        handle.result(timeout=30)
    # The gather's other calls go on (asyncio does not cancel them) until the workflow
    # returns: the one under way then (check(2) at least: its turn comes with check(1)'s
    # end) finishes and is recorded before the outcome; those not begun are dropped.
    assert ran in ([0, 1, 2], [0, 1, 2, 3])
    expected = [(n, True) if n != 1 else (None, False) for n in ran]
    assert [(s.output, s.succeeded) for s in handle.steps()] == expected


def test_a_replay_after_a_worker_restart_meets_the_same_positions(engine: Engine) -> None:
    """Children wait for a message; the parent's gather is part-way through its waits when
    the first worker stops. The second worker replays the parent from its records: the
    calls meet the same positions (a different order fails with NonDeterminismError)."""

    @engine.workflow
    async def waiter(n: int) -> int:
        await engine.recv_async("go", timeout=60)
        return n

    async def start_and_wait(i: int) -> int:
        handle = await engine.start_async(waiter, i)
        return int(await handle.result_async())

    @engine.workflow
    async def parent(n: int) -> list[int]:
        return list(await asyncio.gather(*(start_and_wait(i) for i in range(n))))

    handle = engine.start(parent, 6, execution_id="parent")
    children = [f"parent/{i}" for i in range(6)]
    expected = [("child", "waiter")] * 6 + [("wait", c) for c in children]
    with engine.running_worker(concurrency=8):
        wait_until(lambda: len(handle.children()) == 6, timeout=20)
        for child in children[:3]:
            engine.send(child, "go", topic="go")
        wait_until(lambda: calls(handle)[:10] == expected[:10], timeout=20)
    with engine.running_worker(concurrency=8):  # a new worker: no continuation to resume
        for child in children[3:]:
            engine.send(child, "go", topic="go")
        assert handle.result(timeout=30) == list(range(6))
    assert calls(handle) == expected


def test_a_gather_that_raises_a_step_error_can_be_caught(engine: Engine) -> None:
    @engine.step
    async def fails() -> int:
        raise RuntimeError("no")

    @engine.workflow
    async def tolerant() -> str:
        try:
            await asyncio.gather(fails(), fails())
        except StepError:
            return "caught"
        return "not raised"

    with engine.running_worker():
        assert engine.start(tolerant).result(timeout=30) == "caught"
