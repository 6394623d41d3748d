"""Payments for the exactly-once fault test (tests/chaos/test_transaction_steps.py).
Worker processes import this module: ``raftflow worker tests.apps.payments:engine``.

Each execution debits 1 from the shared account and records one row in ``debits``:
``pay``/``apay`` with a transaction step (the write commits with the checkpoint),
``pay_plain`` with a plain step doing the same write directly (the control: a worker
killed between its write and its checkpoint makes the write happen twice). Every attempt
first touches ``<log_dir>/run-<pid>-<payment>``, so the test knows which worker process
holds payments when it kills one.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from pydantic import BaseModel
from raftflow.engine.workflow.transaction import compile_statement
from raftflow.transports.db.flow import Request, single
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, update

from raftflow import AsyncTransaction, Engine, Transaction

engine = Engine()

metadata = MetaData()
accounts = Table(
    "pay_accounts",
    metadata,
    Column("id", String, primary_key=True),
    Column("balance", Integer, nullable=False),
)
# No unique key on payment: a payment debited twice shows as two rows.
debits = Table(
    "pay_debits",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("payment", String, nullable=False),
)

SHARED = "shared"


class Payment(BaseModel):
    id: str
    log_dir: str
    hold: float = 0.2  # seconds the step takes: the window the kills aim at


def _mark(payment: Payment) -> None:
    Path(payment.log_dir, f"run-{os.getpid()}-{payment.id}").touch()


def _debit_statement() -> object:
    return (
        update(accounts)
        .where(accounts.c.id == SHARED, accounts.c.balance >= 1)
        .values(balance=accounts.c.balance - 1)
    )


@engine.transaction
def debit(tx: Transaction, payment: Payment) -> str:
    _mark(payment)
    time.sleep(payment.hold)
    tx.execute(_debit_statement(), expect_rows=1)
    tx.execute(insert(debits).values(payment=payment.id))
    return payment.id


@engine.transaction
async def adebit(tx: AsyncTransaction, payment: Payment) -> str:
    _mark(payment)
    await asyncio.sleep(payment.hold)
    tx.execute(_debit_statement(), expect_rows=1)
    tx.execute(insert(debits).values(payment=payment.id))
    return payment.id


@engine.workflow
def pay(payment: Payment) -> str:
    return debit(payment)


@engine.workflow
async def apay(payment: Payment) -> str:
    return await adebit(payment)


@engine.step
def plain_debit(payment: Payment) -> str:
    """The control: the same write, done directly, then the step's own checkpoint."""
    _mark(payment)
    request = Request(
        (
            compile_statement(_debit_statement(), read=False),
            compile_statement(insert(debits).values(payment=payment.id), read=False),
        )
    )
    engine.store.database.run(single(request))
    time.sleep(payment.hold)
    return payment.id


@engine.workflow
def pay_plain(payment: Payment) -> str:
    return plain_debit(payment)
