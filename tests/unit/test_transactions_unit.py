"""Transaction steps on the embedded backend (in-memory SQLite): the statements, what is
refused, and the step's semantics (commit-or-nothing, a failed guard, retries).
tests/integration/test_transactions.py runs the same against rqlite and SQLite files,
sync and async; tests/chaos/test_transaction_steps.py under kill -9."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from raftflow.engine.workflow.sqlcompile import RESERVED
from raftflow.engine.workflow.transaction import compile_statement
from sqlalchemy import (
    Column,
    DateTime,
    Integer,
    MetaData,
    String,
    Table,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.schema import CreateTable, DropTable

from raftflow import (
    AsyncTransaction,
    Engine,
    InvalidArgumentError,
    NotInWorkflowError,
    RefusedStatementError,
    Retry,
    StepError,
    Transaction,
    TransactionError,
    WorkflowFailedError,
)
from tests.support import wait_until

metadata = MetaData()
accounts = Table(
    "accounts",
    metadata,
    Column("id", String, primary_key=True),
    Column("balance", Integer, nullable=False),
)
debits = Table(
    "debits",
    metadata,
    Column("payment", String, primary_key=True),
    Column("account", String, nullable=False),
    Column("at", DateTime),
)


# -- statements ---------------------------------------------------------------------------


def test_core_statements_compile_to_named_parameters() -> None:
    statement = compile_statement(
        update(accounts)
        .where(accounts.c.id == "a", accounts.c.balance >= 5)
        .values(balance=accounts.c.balance - 5),
        read=False,
    )
    assert "UPDATE accounts SET balance=(accounts.balance - :balance_1)" in statement.sql
    assert ":id_1" in statement.sql
    assert dict(statement.params) == {"balance_1": 5, "id_1": "a", "balance_2": 5}
    read = compile_statement(
        select(accounts.c.balance).where(accounts.c.id.in_(["a", "b"])), read=True
    )
    assert dict(read.params) == {"id_1_1": "a", "id_1_2": "b"}


def test_text_takes_bound_parameters_and_types_convert_for_sqlite() -> None:
    statement = compile_statement(
        text("UPDATE accounts SET balance = balance - :n WHERE id = :id"),
        {"n": 1, "id": "a"},
        read=False,
    )
    assert dict(statement.params) == {"n": 1, "id": "a"}
    at = datetime.datetime(2026, 1, 2, 3, 4, 5)
    row = compile_statement(insert(debits).values(payment="p", account="a", at=at), read=False)
    assert dict(row.params)["at"] == "2026-01-02 03:04:05.000000"  # SQLAlchemy's conversion


def test_a_missing_parameter_is_refused() -> None:
    with pytest.raises(RefusedStatementError, match="does not compile"):
        compile_statement(text("DELETE FROM accounts WHERE id = :id"), {}, read=False)


@pytest.mark.parametrize(
    ("statement", "params", "match"),
    [
        ("UPDATE accounts SET balance = 0", None, "not strings"),
        (42, None, "not int"),
        (CreateTable(accounts), None, "DDL"),
        (DropTable(accounts), None, "DDL"),
        (text("CREATE TABLE x (a)"), None, "DDL"),
        (text("DROP TABLE accounts"), None, "DDL"),
        (text("BEGIN"), None, "transaction control"),
        (text("COMMIT"), None, "transaction control"),
        (text("PRAGMA writable_schema = 1"), None, "PRAGMA"),
        (text("UPDATE accounts SET balance = 0; DELETE FROM accounts"), None, "one statement"),
        (text("DELETE FROM accounts RETURNING id"), None, "RETURNING"),
        (update(accounts).values(balance=0).returning(accounts.c.id), None, "RETURNING"),
        (text("DELETE FROM steps"), None, "raftflow's own"),
        (text('UPDATE "Messages" SET event = 1'), None, "raftflow's own"),
        (text("INSERT INTO raftflow_schema VALUES (9, 'x', 0, 'y')"), None, "raftflow's own"),
        (text("DELETE FROM sqlite_sequence"), None, "raftflow's own"),
        (Table("executions", MetaData(), Column("id", String)).delete(), None, "raftflow's own"),
        (text("UPDATE accounts SET balance = :b"), {"b": b"\x00"}, "JSON scalars"),
        (text("UPDATE accounts SET balance = :b"), {"b": [1, 2]}, "JSON scalars"),
        (text("UPDATE accounts SET balance = :b"), {"b": float("nan")}, "finite"),
        (text("UPDATE accounts SET balance = :b"), {"b": 2**70}, "INTEGER"),
        (select(accounts), None, "not an INSERT"),
        (text("SELECT * FROM accounts"), None, "reads go to tx.query"),
    ],
)
def test_writes_that_are_refused(statement: Any, params: Any, match: str) -> None:
    with pytest.raises(RefusedStatementError, match=match) as caught:
        compile_statement(statement, params, read=False)
    assert isinstance(caught.value, InvalidArgumentError)
    assert isinstance(caught.value, TransactionError)


def test_reads_that_are_refused_and_a_cte_read() -> None:
    with pytest.raises(RefusedStatementError, match="take a SELECT"):
        compile_statement(text("DELETE FROM accounts"), read=True)
    with pytest.raises(RefusedStatementError, match="not a SELECT"):
        compile_statement(update(accounts).values(balance=1), read=True)
    with pytest.raises(RefusedStatementError, match="raftflow's own"):
        compile_statement(text("SELECT * FROM executions"), read=True)
    cte = select(accounts.c.id).cte("ids")
    statement = compile_statement(select(cte.c.id), read=True)
    assert statement.sql.startswith("SELECT * FROM (WITH")


def test_reserved_names_come_from_the_migrations() -> None:
    assert {"messages", "groups", "executions", "steps", "signals", "raftflow_schema"} <= RESERVED
    assert "transaction_checks" in RESERVED
    assert "accounts" not in RESERVED


# -- the step on embedded SQLite --------------------------------------------------------


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine.from_url("sqlite://")
    engine.create_tables(metadata)
    engine.create_tables(metadata)  # IF NOT EXISTS: twice is fine
    engine.store.database.run(_seed("a", 3))
    yield engine
    engine.close()


def _seed(account: str, balance: int) -> Any:
    from raftflow.transports.db.flow import Request, single

    statement = compile_statement(insert(accounts).values(id=account, balance=balance), read=False)
    return single(Request((statement,)))


def _balance(engine: Engine, account: str = "a") -> Any:
    from raftflow.transports.db.flow import Request, single

    statement = compile_statement(
        select(accounts.c.balance).where(accounts.c.id == account), read=True
    )
    response = engine.store.database.run(single(Request((statement,), level="strong")))
    row = response[0].first()
    return None if row is None else row["balance"]


def _count(engine: Engine, table: str) -> int:
    from raftflow.transports.db.flow import Request, Statement, single

    response = engine.store.database.run(
        single(Request((Statement("count", f"SELECT COUNT(*) AS n FROM {table}"),)))
    )
    return int(response[0].rows[0][0])


def _define(engine: Engine, *, is_async: bool, retry: Retry | None = None) -> Any:
    if is_async:

        @engine.transaction(name="debit", retry=retry)
        async def adebit(tx: AsyncTransaction, payment: str, amount: int) -> int:
            query = select(accounts.c.balance).where(accounts.c.id == "a")
            balance = await tx.scalar(query)
            tx.execute(
                update(accounts)
                .where(accounts.c.id == "a", accounts.c.balance >= amount)
                .values(balance=accounts.c.balance - amount),
                expect_rows=1,
            )
            tx.execute(insert(debits).values(payment=payment, account="a"))
            return int(balance) - amount

        @engine.workflow(name="pay")
        async def apay(spec: dict[str, Any]) -> int:
            return int(await adebit(spec["payment"], spec["amount"]))

        return apay

    @engine.transaction(name="debit", retry=retry)
    def debit(tx: Transaction, payment: str, amount: int) -> int:
        balance = tx.scalar(select(accounts.c.balance).where(accounts.c.id == "a"))
        tx.execute(
            update(accounts)
            .where(accounts.c.id == "a", accounts.c.balance >= amount)
            .values(balance=accounts.c.balance - amount),
            expect_rows=1,
        )
        tx.execute(insert(debits).values(payment=payment, account="a"))
        return int(balance) - amount

    @engine.workflow(name="pay")
    def pay(spec: dict[str, Any]) -> int:
        return int(debit(spec["payment"], spec["amount"]))

    return pay


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_transaction_step_writes_with_its_checkpoint(engine: Engine, is_async: bool) -> None:
    pay = _define(engine, is_async=is_async)
    with engine.running_worker(concurrency=2):
        assert engine.start(pay, {"payment": "p1", "amount": 2}).result(timeout=20) == 1
        handle = engine.start(pay, {"payment": "p2", "amount": 2})  # only 1 left: the guard
        with pytest.raises(WorkflowFailedError, match="TransactionAbortedError"):
            handle.result(timeout=20)
    assert _balance(engine) == 1
    assert _count(engine, "debits") == 1  # the aborted attempt wrote nothing
    (step,) = handle.steps()
    assert step.status == "failed" and step.error is not None
    assert step.error.type == "TransactionAbortedError"
    assert "expect_rows=1" in step.error.message


def test_a_failed_guard_is_retried_then_succeeds(engine: Engine) -> None:
    pay = _define(engine, is_async=False, retry=Retry(max_attempts=30, delay=0.05, backoff=1.0))
    with engine.running_worker(concurrency=2):
        handle = engine.start(pay, {"payment": "p1", "amount": 5})  # the balance is 3
        wait_until(lambda: any(s.status == "retrying" for s in handle.steps()))
        assert _balance(engine) == 3 and _count(engine, "debits") == 0
        engine.store.database.run(_set_balance("a", 10))
        assert handle.result(timeout=20) == 5
    assert _balance(engine) == 5
    assert _count(engine, "debits") == 1
    (step,) = handle.steps()
    assert step.status == "succeeded" and step.attempts >= 2
    assert {a.type for a in step.history} == {"TransactionAbortedError"}


def _set_balance(account: str, balance: int) -> Any:
    from raftflow.transports.db.flow import Request, single

    statement = compile_statement(
        update(accounts).where(accounts.c.id == account).values(balance=balance), read=False
    )
    return single(Request((statement,)))


def test_a_read_after_a_write_and_misuse_are_clear_errors(engine: Engine) -> None:
    seen: list[BaseException] = []

    @engine.transaction
    def misuse(tx: Transaction) -> None:
        tx.execute(update(accounts).values(balance=7))
        try:
            tx.query(select(accounts))
        except TransactionError as exc:
            seen.append(exc)
        tx.execute(text("DELETE FROM steps"))  # refused: the attempt fails

    @engine.workflow
    def flow() -> None:
        misuse()

    with (
        engine.running_worker(concurrency=1),
        pytest.raises(WorkflowFailedError, match="RefusedStatementError"),
    ):
        engine.start(flow).result(timeout=20)
    assert "read after a write" in str(seen[0])
    assert _balance(engine) == 3  # nothing written: the attempt failed
    tx = Transaction(None)  # type: ignore[arg-type]
    tx.close()
    with pytest.raises(TransactionError, match="attempt is over"):
        tx.execute(update(accounts).values(balance=1))


def test_outside_a_workflow_and_the_plain_function(engine: Engine) -> None:
    @engine.transaction
    def touch(tx: Transaction, value: int) -> int:
        tx.execute(update(accounts).values(balance=value), expect_rows=1)
        return value

    with pytest.raises(NotInWorkflowError, match="__wrapped__"):
        touch(1)
    tx = Transaction(None)  # type: ignore[arg-type]
    assert touch.__wrapped__(tx, 4) == 4  # type: ignore[attr-defined]
    (write,) = tx.writes
    assert write.expect_rows == 1 and "UPDATE accounts" in write.statement.sql
    with pytest.raises(RefusedStatementError, match="expect_rows"):
        tx.execute(update(accounts).values(balance=1), expect_rows=-1)


def test_create_tables_refuses_raftflow_names_and_non_metadata(engine: Engine) -> None:
    with pytest.raises(RefusedStatementError, match="MetaData"):
        engine.create_tables(accounts)
    bad = MetaData()
    Table("steps", bad, Column("id", Integer, primary_key=True))
    with pytest.raises(RefusedStatementError, match="raftflow's own"):
        engine.create_tables(bad)


def test_a_step_without_writes_is_a_plain_step_and_async_reads_are_awaited(engine: Engine) -> None:
    @engine.transaction
    async def peek(tx: AsyncTransaction) -> list[dict[str, Any]]:
        assert await tx.first(select(accounts).where(accounts.c.id == "zz")) is None
        return await tx.query(select(accounts.c.id, accounts.c.balance))

    @engine.workflow
    async def look() -> list[dict[str, Any]]:
        return list(await peek())

    with engine.running_worker(concurrency=1):
        assert engine.start(look).result(timeout=20) == [{"id": "a", "balance": 3}]


def test_a_refused_commit_rewinds_the_workflow_that_went_on_with_the_result(
    engine: Engine,
) -> None:
    """The record (and writes) of a transaction step commit with the next call: when they
    are refused, the workflow has already gone on with the result. The run rewinds: the
    next step never runs with that result, and the replay raises StepError instead."""
    notified: list[Any] = []

    @engine.transaction
    def take(tx: Transaction, amount: int) -> int:
        tx.execute(
            update(accounts)
            .where(accounts.c.id == "a", accounts.c.balance >= amount)
            .values(balance=accounts.c.balance - amount),
            expect_rows=1,
        )
        return amount

    @engine.step
    def notify(value: Any) -> None:
        notified.append(value)

    @engine.workflow
    def flow(amount: int) -> str:
        try:
            taken = take(amount)
        except StepError:
            notify("declined")
            return "declined"
        notify(taken)
        return f"took {taken}"

    with engine.running_worker(concurrency=1):
        assert engine.start(flow, 2).result(timeout=20) == "took 2"
        assert engine.start(flow, 2).result(timeout=20) == "declined"  # 1 left
    assert notified == [2, "declined"]
    assert _balance(engine) == 1


def test_compiled_statements_are_reused_with_their_own_values() -> None:
    def debit(account: str, amount: int) -> Any:
        return (
            update(accounts)
            .where(accounts.c.id == account, accounts.c.balance >= amount)
            .values(balance=accounts.c.balance - amount)
        )

    first = compile_statement(debit("a", 1), read=False)
    second = compile_statement(debit("b", 7), read=False)  # from the cache
    assert first.sql == second.sql
    assert dict(first.params) == {"balance_1": 1, "id_1": "a", "balance_2": 1}
    assert dict(second.params) == {"balance_1": 7, "id_1": "b", "balance_2": 7}
    by_text = text("DELETE FROM accounts WHERE id = :id")
    assert dict(compile_statement(by_text, {"id": "x"}, read=False).params) == {"id": "x"}
    assert dict(compile_statement(by_text, {"id": "y"}, read=False).params) == {"id": "y"}
    two = compile_statement(select(accounts).where(accounts.c.id.in_(["a", "b"])), read=True)
    three = compile_statement(select(accounts).where(accounts.c.id.in_(["a", "b", "c"])), read=True)
    assert len(two.params) == 2 and len(three.params) == 3  # IN lists: compiled each time
    for _ in range(2):  # refused every time (a refusal is never cached)
        with pytest.raises(RefusedStatementError, match="raftflow's own"):
            compile_statement(text("DELETE FROM steps"), read=False)


def test_a_failed_read_hands_the_execution_back_and_is_never_its_outcome(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from raftflow.engine.workflow import transaction

    from raftflow import UnavailableError

    real = transaction._read_flow
    failures = [UnavailableError("no leader (injected)")]

    def flaky(statement: Any) -> Any:
        if failures:
            raise failures.pop()
        return real(statement)

    monkeypatch.setattr(transaction, "_read_flow", flaky)

    @engine.transaction
    def peek(tx: Transaction) -> int:
        return int(tx.scalar(select(accounts.c.balance).where(accounts.c.id == "a")))

    @engine.workflow
    def look() -> int:  # a sync workflow ...
        return int(peek()) + int(apeek())

    @engine.transaction
    async def apeek(tx: AsyncTransaction) -> int:  # ... calling an async transaction step
        return int(await tx.scalar(select(accounts.c.balance).where(accounts.c.id == "a")))

    with engine.running_worker(concurrency=1, retry_delay=0.05):
        handle = engine.start(look)
        assert handle.result(timeout=30) == 6
    assert not failures
    steps = handle.steps()
    assert [(s.name, s.status, s.attempts, s.history) for s in steps] == [
        ("peek", "succeeded", 1, ()),
        ("apeek", "succeeded", 1, ()),
    ]
