"""Transaction steps on real rqlite (the session's 3-node cluster) and on a SQLite file,
sync and async: a transaction step's writes apply with its checkpoint or not at all.

- in shared batches, concurrent steps each commit or abort on their own;
- a commit whose lease is stale is refused, writes and all;
- the same commit sent twice (an ambiguous retry) applies once and is reported applied;
- a lean commit while a cancel waits: its writes and record apply together, or neither.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.workflow.events import RUN, RUN_TEXT
from raftflow.engine.workflow.transaction import compile_statement
from raftflow.stores.claim import claim_runs
from raftflow.stores.commit import Commit, Write
from raftflow.transports.db.flow import Flow
from raftflow.transports.rqlite.local import LocalCluster
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select, update

from raftflow import (
    AsyncTransaction,
    Engine,
    Status,
    Transaction,
    WorkflowFailedError,
)
from tests.support import LoopThread, clear_tables, rows

metadata = MetaData()
accounts = Table(
    "tx_accounts",
    metadata,
    Column("id", String, primary_key=True),
    Column("balance", Integer, nullable=False),
)
debits = Table("tx_debits", metadata, Column("payment", String, primary_key=True))


@pytest.fixture(params=["rqlite", "sqlite"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "rqlite":
        cluster: LocalCluster = request.getfixturevalue("rqlite_cluster")
        clear_tables(cluster.url)
        engine = Engine.from_url(cluster.url, auto_migrate=True)
    else:
        engine = Engine.from_url(f"sqlite:///{tmp_path / 'tx.db'}")
    engine.create_tables(metadata)
    from tests.support import execute

    execute(
        engine.store.database,
        compile_statement(accounts.delete(), read=False),
        compile_statement(debits.delete(), read=False),
    )
    yield engine
    engine.close()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _write(engine: Engine, statement: Any) -> None:
    from tests.support import execute

    execute(engine.store.database, compile_statement(statement, read=False))


def _balance(engine: Engine, account: str) -> int:
    (row,) = rows(engine.store.database, "SELECT balance FROM tx_accounts WHERE id = ?", account)
    return int(row["balance"])


def _debits(engine: Engine) -> set[str]:
    return {r["payment"] for r in rows(engine.store.database, "SELECT payment FROM tx_debits")}


def _workflow(engine: Engine, mode: str) -> Any:
    """pay(spec): debit spec["amount"] from spec["account"] and record the payment."""
    if mode == "async":

        @engine.transaction(name="debit")
        async def adebit(tx: AsyncTransaction, account: str, payment: str, amount: int) -> int:
            balance = await tx.scalar(select(accounts.c.balance).where(accounts.c.id == account))
            tx.execute(
                update(accounts)
                .where(accounts.c.id == account, accounts.c.balance >= amount)
                .values(balance=accounts.c.balance - amount),
                expect_rows=1,
            )
            tx.execute(insert(debits).values(payment=payment))
            return int(balance) - amount

        @engine.workflow(name="pay")
        async def apay(spec: dict[str, Any]) -> int:
            return int(await adebit(spec["account"], spec["payment"], spec["amount"]))

        return apay

    @engine.transaction(name="debit")
    def debit(tx: Transaction, account: str, payment: str, amount: int) -> int:
        balance = tx.scalar(select(accounts.c.balance).where(accounts.c.id == account))
        tx.execute(
            update(accounts)
            .where(accounts.c.id == account, accounts.c.balance >= amount)
            .values(balance=accounts.c.balance - amount),
            expect_rows=1,
        )
        tx.execute(insert(debits).values(payment=payment))
        return int(balance) - amount

    @engine.workflow(name="pay")
    def pay(spec: dict[str, Any]) -> int:
        return int(debit(spec["account"], spec["payment"], spec["amount"]))

    return pay


def test_concurrent_transaction_steps_commit_or_abort_each_on_their_own(
    engine: Engine, mode: str
) -> None:
    pay = _workflow(engine, mode)
    _write(engine, insert(accounts).values(id="a", balance=6))
    _write(engine, insert(accounts).values(id="b", balance=100))
    with engine.running_worker(concurrency=12):
        handles = [
            engine.start(pay, {"account": "a", "payment": f"a{i}", "amount": 1}) for i in range(10)
        ] + [engine.start(pay, {"account": "b", "payment": f"b{i}", "amount": 2}) for i in range(6)]
        outcomes = []
        for handle in handles:
            try:
                outcomes.append(handle.result(timeout=60))
            except WorkflowFailedError as exc:
                assert "TransactionAbortedError" in f"{exc.error.type}: {exc.error.message}"
                outcomes.append(None)
    succeeded_a = [h.id for h, o in zip(handles[:10], outcomes[:10]) if o is not None]
    assert len(succeeded_a) == 6  # exactly the balance: the guard refused the other 4
    assert _balance(engine, "a") == 0
    assert _balance(engine, "b") == 88
    assert all(o is not None for o in outcomes[10:])
    # Each debit row exists iff its step was recorded as succeeded.
    recorded = set()
    for handle in handles:
        (step,) = handle.steps()
        if step.status == "succeeded":
            recorded.add(handle.id)
    expected = {f"a{i}" for i, o in enumerate(outcomes[:10]) if o is not None}
    expected |= {f"b{i}" for i in range(6)}
    assert _debits(engine) == expected
    assert len(recorded) == len(expected)


# -- the commit itself, below the step path ---------------------------------------------


def _idle() -> None:
    return None


def _claim(engine: Engine, loop_thread: LoopThread, mode: str) -> Any:
    handle = engine.start(engine.workflow(_idle), execution_id=f"tx-{uuid.uuid4().hex[:8]}")
    queue = engine.transport.flows
    (claimed,) = _run(engine, loop_thread, mode, claim_runs(queue, "w1", 30.0, 1, 0))
    assert claimed.lease.group_id == handle.id
    return claimed.lease


def _run(engine: Engine, loop_thread: LoopThread, mode: str, flow: Flow[Any]) -> Any:
    if mode == "sync":
        return engine.store.run(flow)
    store = engine.store.to_async()  # a connection of its own
    try:
        return loop_thread.run(store.run(flow))
    finally:
        loop_thread.run(store.close())


def _commit(lease: Any, payment: str, token: str | None = None) -> Commit:
    debit = update(accounts).where(accounts.c.id == "a", accounts.c.balance >= 1)
    writes = (
        Write(compile_statement(debit.values(balance=accounts.c.balance - 1), read=False), 1),
        Write(compile_statement(insert(debits).values(payment=payment), read=False)),
    )
    return Commit(
        execution_id=lease.group_id,
        lease_seq=lease.seq,
        lease_token=token or lease.token,
        worker_id="w1",
        step_idx=0,
        step_name="debit",
        step_status="succeeded",
        step_output="1",
        step_started_at=0.0,
        status=Status.RUNNING,
        next_event=RUN_TEXT,
        next_token=token or lease.token,
        writes=writes,
    )


def test_a_stale_lease_cannot_apply_its_writes(
    engine: Engine, mode: str, loop_thread: LoopThread
) -> None:
    _write(engine, insert(accounts).values(id="a", balance=5))
    lease = _claim(engine, loop_thread, mode)
    stale = _commit(lease, "p-stale", token="someone-else")
    (outcome,) = _run(engine, loop_thread, mode, engine.store.commits.commit([stale], 30.0))
    assert not outcome.applied and outcome.error == "lease lost" and outcome.aborted is None
    assert _balance(engine, "a") == 5 and _debits(engine) == set()
    assert engine.store.steps(lease.group_id) == []


def test_the_same_commit_sent_twice_applies_once(
    engine: Engine, mode: str, loop_thread: LoopThread
) -> None:
    _write(engine, insert(accounts).values(id="a", balance=5))
    lease = _claim(engine, loop_thread, mode)
    commit = _commit(lease, "p1")
    assert commit.lean
    for _ in range(2):  # the second is what an ambiguous retry sends
        (outcome,) = _run(engine, loop_thread, mode, engine.store.commits.commit([commit], 30.0))
        assert outcome.applied, outcome
    assert _balance(engine, "a") == 4 and _debits(engine) == {"p1"}
    (step,) = engine.store.steps(lease.group_id)
    assert step.status == "succeeded"


def test_a_shared_batch_aborts_only_the_step_whose_guard_failed(
    engine: Engine, mode: str, loop_thread: LoopThread
) -> None:
    _write(engine, insert(accounts).values(id="a", balance=1))
    first = _claim(engine, loop_thread, mode)
    second = _claim(engine, loop_thread, mode)
    commits = [_commit(first, "p1"), _commit(second, "p2")]  # one unit of balance for two
    flow = engine.store.commits.commit(commits, 30.0)
    one, two = _run(engine, loop_thread, mode, flow)
    assert one.applied and not two.applied
    assert two.aborted is not None and "expect_rows=1" in two.aborted
    assert _balance(engine, "a") == 0 and _debits(engine) == {"p1"}
    assert len(engine.store.steps(first.group_id)) == 1
    assert engine.store.steps(second.group_id) == []


def test_a_lean_commit_while_a_cancel_waits_applies_whole_or_not_at_all(
    engine: Engine, mode: str, loop_thread: LoopThread
) -> None:
    _write(engine, insert(accounts).values(id="a", balance=5))
    lease = _claim(engine, loop_thread, mode)
    engine.store.database.run(engine.store.flows.cancel(lease.group_id, "by a test"))
    (outcome,) = _run(
        engine, loop_thread, mode, engine.store.commits.commit([_commit(lease, "p1")], 30.0)
    )
    steps = engine.store.steps(lease.group_id)
    if outcome.applied:
        assert len(steps) == 1 and _balance(engine, "a") == 4 and _debits(engine) == {"p1"}
    else:
        assert steps == [] and _balance(engine, "a") == 5 and _debits(engine) == set()
    assert RUN is not None
