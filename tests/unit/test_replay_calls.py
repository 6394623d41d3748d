"""``engine.replay`` over every kind of call a history records: steps (retried ones and
transaction steps), children and their outcomes, signals, events, sleeps, patches,
``continue_as_new`` and an async workflow's ``asyncio.gather``. Unchanged code replays
each to its end (or, in flight, to where it waits) with no body run again; changed code
is caught where it parts. On a SQLite file (the cluster runs ``tests/unit/test_replay.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.workflow.divergence import Call
from sqlalchemy import Column, Integer, MetaData, String, Table, insert

from raftflow import Engine, ReplayReport, Retry, Status, Transaction, WorkflowFailedError
from tests.support import wait_until

notes = Table(
    "notes",
    MetaData(),
    Column("id", Integer, primary_key=True),
    Column("text", String, nullable=False),
)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'calls.db'}"


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    engine = Engine.from_url(url)
    yield engine
    engine.close()


def kinds(engine: Engine, execution_id: str) -> list[str]:
    return [step.kind for step in engine.store.steps(execution_id)]


def test_every_kind_of_call_replays_from_its_record(engine: Engine) -> None:
    engine.create_tables(notes.metadata)
    ran: list[str] = []  # every step body that ran

    @engine.step(retry=Retry(max_attempts=2, delay=0.01))
    def flaky(n: int) -> int:
        ran.append("flaky")
        if ran.count("flaky") % 2:
            raise ConnectionError("the first attempt of each run fails")
        return n + 7

    @engine.transaction
    def note(tx: Transaction, text: str) -> str:
        ran.append("note")
        tx.execute(insert(notes).values(text=text))
        return text

    @engine.workflow
    def child(n: int) -> int:
        return n * 2

    @engine.workflow
    def everything(n: int) -> list[Any]:
        patched = engine.patched("p1")
        value = flaky(n)
        note(f"run {n}")
        doubled = engine.start(child, value).result()
        engine.set_event("progress", doubled)
        if n == 0:
            engine.send("all", "a note to self", topic="self")
        message = engine.recv("go", timeout=30)
        engine.sleep(0.01)
        if n == 0:
            engine.continue_as_new(1)  # the execution's current run is run 2
        return [patched, doubled, message]

    handle = engine.start(everything, 0, execution_id="all")
    engine.send("all", "first", topic="go")
    engine.send("all", "second", topic="go")
    with engine.running_worker():
        assert handle.result(timeout=30) == [True, 16, "second"]
    current = ["patch", "step", "step", "child", "wait", "event", "recv", "sleep"]
    assert kinds(engine, "all") == current
    assert kinds(engine, "all#1") == [*current[:6], "send", "recv", "sleep"]
    ran_before = list(ran)
    assert engine.replay("all") == ReplayReport("all", "everything", Status.SUCCEEDED, 8, None)
    archived = engine.replay("all#1")  # the run continue_as_new ended
    assert archived == ReplayReport("all#1", "everything", Status.CONTINUED, 9, None)
    assert engine.replay("all/3").consistent  # a child (run 1's, call 3)
    assert ran == ran_before  # no step body ran again
    assert asyncio.run(engine.replay_async("all")) == engine.replay("all")


def test_an_async_gather_replays_in_its_order_and_a_swapped_one_diverges(
    engine: Engine,
) -> None:
    swapped = [False]
    ran: list[str] = []

    @engine.step
    async def left(n: int) -> int:
        ran.append("left")
        return n

    @engine.step
    def right(n: int) -> int:  # a sync step in an async workflow: it runs in a thread
        ran.append("right")
        return -n

    @engine.workflow
    async def child(n: int) -> int:
        return await left(n)

    @engine.workflow
    async def fan(n: int) -> list[int]:
        handles = await asyncio.gather(*(engine.start_async(child, i) for i in range(n)))
        results = list(await asyncio.gather(*(h.result_async() for h in handles)))
        pair = (right(n), left(n)) if swapped[0] else (left(n), right(n))
        return results + list(await asyncio.gather(*pair))

    handle = engine.start(fan, 3)
    with engine.running_worker():
        assert handle.result(timeout=30) == [0, 1, 2, 3, -3]
    assert kinds(engine, handle.id) == ["child"] * 3 + ["wait"] * 3 + ["step"] * 2
    ran_before = list(ran)
    assert engine.replay(handle.id).calls_checked == 8
    swapped[0] = True
    report = engine.replay(handle.id)
    assert report.divergence is not None and report.calls_checked == 6
    assert (report.divergence.recorded, report.divergence.called) == (
        Call("step", "left"),
        Call("step", "right"),
    )
    assert ran == ran_before


def test_executions_in_flight_replay_up_to_where_they_wait(engine: Engine) -> None:
    @engine.step(retry=Retry(max_attempts=3, delay=3600))
    def fails_once() -> int:
        raise ConnectionError("down for an hour")

    @engine.step
    def first() -> int:
        return 1

    @engine.workflow
    def listens() -> Any:
        first()
        return engine.recv("go", timeout=3600)

    @engine.workflow
    def retries() -> int:
        first()
        return fails_once()

    waiting, retrying = engine.start(listens), engine.start(retries)
    with engine.running_worker():
        wait_until(lambda: kinds(engine, waiting.id) == ["step", "recv"], timeout=30)
        wait_until(lambda: len(engine.store.steps(retrying.id)) == 2, timeout=30)
    assert engine.store.steps(retrying.id)[1].status == "retrying"
    for handle in (waiting, retrying):  # the call it waits at is checked too
        assert engine.replay(handle.id).calls_checked == 2
        assert engine.replay(handle.id).status is Status.RUNNING


def test_a_patch_keeps_an_asleep_history_consistent_where_a_bare_change_does_not(
    engine: Engine,
) -> None:
    code = ["old"]

    @engine.step
    def tax(rate: float) -> float:
        return rate

    @engine.workflow
    def invoice() -> float:
        if code[0] == "old":
            charged = tax(0.2)
        elif code[0] == "patched" and engine.patched("new-tax"):
            charged = tax(0.25) + tax(0.0)
        elif code[0] == "patched":
            charged = tax(0.2)
        else:  # "bare": the new calls without a patch
            charged = tax(0.25) + tax(0.0)
        engine.sleep(3600)
        return charged

    handle = engine.start(invoice)
    with engine.running_worker():
        wait_until(lambda: kinds(engine, handle.id) == ["step", "sleep"], timeout=30)
    code[0] = "patched"
    assert engine.replay(handle.id).calls_checked == 2
    code[0] = "bare"
    report = engine.replay(handle.id)
    assert report.divergence is not None and report.divergence.index == 1
    assert (report.divergence.recorded, report.divergence.called) == (
        Call("sleep", "sleep"),
        Call("step", "tax"),
    )


def test_an_input_the_new_code_refuses_is_a_divergence(engine: Engine, url: str) -> None:
    @engine.workflow(name="total")
    def total(n: int) -> int:
        return n

    handle = engine.start(total, 5)
    with engine.running_worker():
        assert handle.result(timeout=30) == 5
    with Engine.from_url(url) as new:

        @new.workflow(name="total")
        def total_of_list(items: list[int]) -> int:
            return sum(items)

        report = new.replay(handle.id)
    assert report.divergence is not None and report.divergence.index == 0
    assert "refuses the recorded input" in report.divergence.reason


def test_the_worker_and_the_replay_name_the_same_first_divergence(engine: Engine) -> None:
    """A gather whose calls swapped places diverges at both: the first one is the news
    (the worker's failure named the last one before)."""
    swapped = [False]

    @engine.step
    async def left() -> str:
        return "l"

    @engine.step
    async def right() -> str:
        return "r"

    @engine.workflow
    async def pair() -> list[str]:
        calls = (right(), left()) if swapped[0] else (left(), right())
        done = list(await asyncio.gather(*calls))
        await engine.sleep_async(1.2)  # parks: the next claim replays the code of then
        return done

    handle = engine.start(pair)
    with engine.running_worker(sticky_cache=0):
        wait_until(lambda: kinds(engine, handle.id) == ["step", "step", "sleep"], timeout=30)
        swapped[0] = True
        report = engine.replay(handle.id)
        with pytest.raises(WorkflowFailedError) as failed:
            handle.result(timeout=30)
    message = failed.value.error.message
    assert failed.value.error.type == "NonDeterminismError"
    assert "call 0 is recorded as step 'left' but the workflow now calls step 'right'" in message
    assert report.divergence is not None and report.divergence.index == 0
    assert message == f"execution {handle.id!r}: {report.divergence}"
