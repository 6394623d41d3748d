"""A transport and a store on two databases (stores/split.py): the queue on one SQLite file,
the state on another. Every primitive works; the queue holds no state, the store nothing
for the queue once done; a stale worker is fenced by the mirror of the lease that replaced
its own; what needs both in one transaction is refused at once.
(Kill -9 between the two writes: tests/integration/test_split_processes.py.)"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from raftflow.engine.workflow.events import RUN
from raftflow.stores import split
from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.records import Claimed, Status
from raftflow.stores.store import SqlStore
from raftflow.transports.contract import Lease
from raftflow.transports.transport import SqlTransport
from sqlalchemy import Column, Integer, MetaData, String, Table, insert

from raftflow import (
    Engine,
    Retry,
    Transaction,
    WorkflowCancelledError,
    WorkflowFailedError,
)
from raftflow.errors import ConfigurationError


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "queue.db", tmp_path / "state.db"


@pytest.fixture
def engine(files: tuple[Path, Path]) -> Iterator[Engine]:
    queue, state = files
    engine = Engine(
        transport=SqlTransport.from_url(f"sqlite:///{queue}"),
        store=SqlStore.from_url(f"sqlite:///{state}"),
    )
    yield engine
    engine.close()


def _count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_every_primitive_runs_with_the_queue_and_the_state_on_two_files(
    engine: Engine, files: tuple[Path, Path]
) -> None:
    @engine.step
    def add(a: int, b: int) -> int:
        return a + b

    @engine.workflow
    def child(n: int) -> int:
        return add(n, 100)

    @engine.workflow
    def parent(n: int) -> int:
        x = add(add(n, 1), 1)
        engine.sleep(1.2)  # parks: the turn ends, the event waits in the store
        got = engine.recv("go", timeout=60)  # parks until the message wakes it
        return x + got + engine.start(child, x).result()

    with engine.running_worker(concurrency=4):
        handle = engine.start(parent, 5)
        engine.send(handle.id, 1000, topic="go")
        assert handle.result(timeout=30) == 7 + 1000 + 107
    assert [s.name for s in handle.steps()][:4] == ["add", "add", "sleep", "go"]
    queue, state = files
    # The state is in the store only; what was published for the queue reached it.
    assert _count(queue, "executions") == 0 and _count(state, "executions") == 2
    assert _count(queue, "messages") == 0 and _count(state, "messages") == 0


def test_a_message_and_a_cancel_wake_a_parked_execution_before_its_time(
    engine: Engine,
) -> None:
    @engine.workflow
    def waits(_: None) -> object:
        return engine.recv("go", timeout=3600)

    @engine.workflow
    def sleeps(_: None) -> None:
        engine.sleep(3600)

    with engine.running_worker(concurrency=4):
        waiting, sleeping = engine.start(waits, None), engine.start(sleeps, None)
        for handle in (waiting, sleeping):  # both parked: their wait recorded
            deadline = time.monotonic() + 20
            while not handle.steps() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert handle.steps(), "the wait should be recorded"
        engine.send(waiting.id, "now", topic="go")
        engine.cancel(sleeping.id)
        assert waiting.result(timeout=20) == "now"
        with pytest.raises(WorkflowCancelledError):
            sleeping.result(timeout=20)


def test_a_stale_worker_is_fenced_by_the_lease_that_replaced_its_own(
    files: tuple[Path, Path],
) -> None:
    """Two claims of one event, the first lease lapsed: the first worker's commit is
    refused, the second's applies (the mirror of the second lease superseded the first,
    and the first claim's request arriving again late does not supersede it back)."""
    queue, state = (f"sqlite:///{path}" for path in files)
    transport, store = SqlTransport.from_url(queue), SqlStore.from_url(state)
    store.share(transport)
    store.start("e1", "wf", None, event={"kind": "run"})

    async def race() -> tuple[bool, bool]:
        aqueue = transport.to_async()
        astore = store.to_async(aqueue)
        try:
            [first] = await astore.claim(aqueue, "w1", visibility=0.2)
            await asyncio.sleep(0.4)  # the first lease lapses
            [second] = await astore.claim(aqueue, "w2", visibility=30)
            assert second.lease.seq == first.lease.seq  # the same event, again
            # The first claim's request to the store, arriving again late (a retry the
            # network delayed): it must not take the execution back.
            late = split.adopt(astore.clock, [first.lease], None)
            assert [c.execution for c in await astore.database.run(late)] == [None]
            [stale] = await astore.commit([_step(first.lease, "w1")], 30)
            [live] = await astore.commit([_step(second.lease, "w2")], 30)
            return stale.applied, live.applied
        finally:
            await astore.close()
            await aqueue.close()

    try:
        assert asyncio.run(race()) == (False, True)
        [step] = store.steps("e1")
        assert step.output == "w2"
    finally:
        transport.close()
        store.close()


def test_what_needs_one_database_is_refused_at_once(engine: Engine) -> None:
    @engine.workflow(concurrency=2)
    def limited(_: None) -> None:
        return None

    with pytest.raises(ConfigurationError, match="concurrency limit needs the queue"):
        engine.start(limited, None)

    @engine.workflow
    @engine.scheduled("* * * * *")
    def ticks(_: object) -> None:
        return None

    with (
        pytest.raises(ConfigurationError, match="schedules need the queue"),
        engine.running_worker(),
    ):
        pass


def test_retries_continue_as_new_transactions_debounce_and_resume_on_two_files(
    engine: Engine, files: tuple[Path, Path]
) -> None:
    metadata = MetaData()
    columns = (Column("id", String, primary_key=True), Column("balance", Integer))
    accounts = Table("accounts", metadata, *columns)
    engine.create_tables(metadata)
    attempts: list[int] = []
    broken = [True]

    @engine.transaction
    def open_account(tx: Transaction, account: str, balance: int) -> None:
        tx.execute(insert(accounts).values(id=account, balance=balance))

    @engine.step(retry=Retry(max_attempts=3, delay=1.1))  # over a second: parks between
    def flaky(n: int) -> int:
        attempts.append(n)
        if len(attempts) < 2:
            raise ConnectionError("not yet")
        return n

    @engine.workflow
    def banking(account: str) -> int:
        open_account(account, 10)
        return flaky(5)

    @engine.workflow
    def counting(n: int) -> int:
        if n < 3:
            engine.continue_as_new(n + 1)
        return n

    @engine.workflow
    def echo(text: str) -> str:
        return text

    @engine.step(retry=Retry(max_attempts=1))
    def fragile() -> str:
        if broken[0]:
            raise ValueError("broken until fixed")
        return "fixed"

    @engine.workflow
    def resumable(_: None) -> str:
        return fragile()

    with engine.running_worker(concurrency=4):
        bank = engine.start(banking, "acct-1")
        count = engine.start(counting, 0)
        engine.start(echo, "first", execution_id="burst", debounce=1.0)
        burst = engine.start(echo, "last", execution_id="burst", debounce=1.0)
        failing = engine.start(resumable, None)
        assert bank.result(timeout=30) == 5 and attempts == [5, 5]
        assert count.result(timeout=30) == 3 and len(engine.store.runs(count.id)) == 3
        assert burst.result(timeout=30) == "last"
        with pytest.raises(WorkflowFailedError):
            failing.result(timeout=30)
        broken[0] = False
        engine.resume(failing.id)
        assert failing.result(timeout=30) == "fixed"
    queue, state = files
    with sqlite3.connect(state) as db:
        assert db.execute("SELECT id, balance FROM accounts").fetchall() == [("acct-1", 10)]
    with sqlite3.connect(queue) as db:
        assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'accounts'").fetchall()
    assert _count(queue, "messages") == 0 and _count(state, "messages") == 0


def test_a_start_folds_into_a_debounced_execution_until_a_claim_takes_it(
    files: tuple[Path, Path],
) -> None:
    """The debounced first event reached the queue (its time came), then a start of the same
    id folded into it: the delivery that was early is let go, the next at the new time runs
    the last input -- as on one database, where a start folds until the claim."""
    queue, state = (f"sqlite:///{path}" for path in files)
    transport, store = SqlTransport.from_url(queue), SqlStore.from_url(state)
    store.share(transport)

    def start(value: int, debounce: float) -> None:
        store.run(store.flows.start("d1", "wf", value, 0, RUN, debounce=debounce))

    async def claim() -> list[Claimed]:
        aqueue = transport.to_async()
        astore = store.to_async(aqueue)
        try:
            claimed = await astore.claim(aqueue, "w1", visibility=30)
            for item in claimed:  # what a worker does with an event it has nothing to run for
                if item.execution is None:
                    await aqueue.ack_leases([item.lease])
            return claimed
        finally:
            await astore.close()
            await aqueue.close()

    try:
        start(1, debounce=0.1)
        time.sleep(0.2)
        store.relay()  # its time came: the event is in the queue
        assert transport.stats().messages == 1
        start(2, debounce=0.3)  # folds: the new input, the park pushed back
        [early] = asyncio.run(claim())
        assert early.execution is None  # let go: it waits for its new time
        record = store.get("d1")
        assert record is not None and record.status is Status.PENDING and record.input == 2
        time.sleep(0.4)
        store.relay()
        [due] = asyncio.run(claim())
        assert due.execution is not None and due.execution.input == 2
        assert due.execution.status is Status.RUNNING
        assert _count(files[1], "messages") == 1  # the mirror alone: the park was consumed
    finally:
        transport.close()
        store.close()


def test_a_step_sent_again_in_full_ends_the_turn_and_leaves_no_event_leased_in_the_store(
    files: tuple[Path, Path],
) -> None:
    """A lean step commit that wrote no row while its lease holds (here: a record at its
    index already there, as an earlier attempt under another commit id leaves it) is sent
    again in full. On one database that commit keeps the next event leased to the worker;
    on a split pair it may not -- nothing would relay or extend it there -- so it ends the
    turn: the next event is published free, to the queue, and the queue's lease acked."""
    queue, state = (f"sqlite:///{path}" for path in files)
    transport, store = SqlTransport.from_url(queue), SqlStore.from_url(state)
    store.share(transport)
    store.start("e1", "wf", None, event={"kind": "run"})

    async def the_same_step_twice() -> list[CommitOutcome]:
        aqueue = transport.to_async()
        astore = store.to_async(aqueue)
        try:
            [claimed] = await astore.claim(aqueue, "w1", visibility=30)
            commit = _step(claimed.lease, "w1")
            assert commit.lean
            again = replace(commit, commit_id="again")
            return [*await astore.commit([commit], 30), *await astore.commit([again], 30)]
        finally:
            await astore.close()
            await aqueue.close()

    try:
        first, again = asyncio.run(the_same_step_twice())
        assert first.applied and first.next_seq is not None  # within the turn
        assert again.applied and again.next_seq is None  # in full: the turn ends
        with sqlite3.connect(files[1]) as db:
            assert db.execute("SELECT seq, locked_by FROM messages").fetchall() == []
        with sqlite3.connect(files[0]) as db:  # the next event, free; the old one acked
            assert db.execute("SELECT locked_by FROM messages").fetchall() == [(None,)]
    finally:
        transport.close()
        store.close()


def _step(lease: Lease, worker: str) -> Commit:
    """The lean commit of a run's first step (its output: the worker's name)."""
    return Commit(
        execution_id=lease.group_id,
        lease_seq=lease.seq,
        lease_token=lease.token,
        worker_id=worker,
        step_idx=0,
        step_name="s",
        step_status="succeeded",
        step_output=f'"{worker}"',
        step_started_at=time.time(),
        status=Status.RUNNING,
        next_event='{"kind": "run"}',
        next_token=lease.token,
    )
