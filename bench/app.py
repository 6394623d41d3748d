"""The workflows the benchmark's raftflow workers run (``bench.app:engine``).

``chain`` runs ``steps`` steps one after another; a step does nothing (or sleeps
``sleep`` seconds), so what is measured is raftflow's own cost per step. ``chain_sync``
is the same with a sync workflow and sync steps (run in the worker's thread pool).
``one`` is the 1-step workflow of the end-to-end latency phase; ``turnaround_chain``,
``turnaround_chain_sync`` and ``turnaround_one`` are ``chain``, ``chain_sync`` and ``one``
for the latency phase. ``ledger`` is the
``transactions`` phase's chain: each step is a transaction step that debits 1 from the
execution's own account (guarded by ``expect_rows``) and appends a ledger row, both
committed with the step's checkpoint.

The timers phase (:mod:`bench.timers`) uses the durable primitives: ``nap`` sleeps then
runs one step, ``inbox`` waits for a message then runs one step, ``parent`` starts ``one``
as a child and waits for it, ``flaky`` retries a step that fails its first attempts,
``streamer`` writes ``STREAM_WRITES`` values to a durable stream then runs one step.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, update

from raftflow import AsyncTransaction, Engine, Retry, current_step

engine = Engine()


class Chain(BaseModel):
    steps: int
    sleep: float = 0.0


@engine.step
async def tick(index: int, sleep: float) -> int:
    if sleep > 0:
        await asyncio.sleep(sleep)
    return index


@engine.step
def tick_sync(index: int, sleep: float) -> int:
    if sleep > 0:
        time.sleep(sleep)
    return index


async def ticks(spec: Chain) -> int:
    """``spec.steps`` ticks in turn (the body of ``chain`` and ``turnaround_chain``)."""
    total = 0
    for i in range(spec.steps):
        total += await tick(i, spec.sleep)
    return total


@engine.workflow
async def chain(spec: Chain) -> int:
    return await ticks(spec)


@engine.workflow
def chain_sync(spec: Chain) -> int:
    return sum(tick_sync(i, spec.sleep) for i in range(spec.steps))


@engine.workflow
async def one(value: int) -> int:
    return await tick(value, 0.0)


#: The values ``streamer`` writes before its step.
STREAM_WRITES = 10


@engine.workflow
async def streamer(value: int) -> int:
    for i in range(STREAM_WRITES):
        await engine.write_stream_async("bench", i)
    return await tick(value, 0.0)


# The latency phase's own names for ``chain`` and ``one``: it runs right after the raw
# phase, and the throughput and end-to-end phases find their executions by workflow name.
@engine.workflow
async def turnaround_chain(spec: Chain) -> int:
    return await ticks(spec)


@engine.workflow
def turnaround_chain_sync(spec: Chain) -> int:
    return sum(tick_sync(i, spec.sleep) for i in range(spec.steps))


@engine.workflow
async def turnaround_one(value: int) -> int:
    return await tick(value, 0.0)


metadata = MetaData()
accounts = Table(
    "bench_accounts",
    metadata,
    Column("id", String, primary_key=True),
    Column("balance", Integer, nullable=False),
)
ledger = Table(
    "bench_ledger",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("account", String, nullable=False),
    Column("idx", Integer, nullable=False),
)


class Ledger(BaseModel):
    steps: int
    account: str


@engine.transaction
async def debit(tx: AsyncTransaction, account: str, index: int) -> int:
    tx.execute(
        update(accounts)
        .where(accounts.c.id == account, accounts.c.balance >= 1)
        .values(balance=accounts.c.balance - 1),
        expect_rows=1,
    )
    tx.execute(insert(ledger).values(account=account, idx=index))
    return index


@engine.workflow(name="ledger")
async def ledger_chain(spec: Ledger) -> int:
    total = 0
    for i in range(spec.steps):
        total += await debit(spec.account, i)
    return total


# ------------------------------------------------------------------------- timers phase


@engine.workflow
async def nap(seconds: float) -> int:
    await engine.sleep_async(seconds)
    return await tick(1, 0.0)


@engine.workflow
async def inbox(topic: str) -> Any:
    message = await engine.recv_async(topic, timeout=None)
    await tick(1, 0.0)
    return message


@engine.workflow
async def parent(value: int) -> int:
    child = await engine.start_async(one, value)
    return await child.result_async()


class Flaky(BaseModel):
    fail_times: int = 1
    parked: bool = False  # the 2 s retry delay (the execution parks) or 0.1 s (in place)


@engine.step(retry=Retry(max_attempts=5, delay=0.1, backoff=1.0))
async def flaky_soon(fail_times: int) -> int:
    attempt = current_step().attempt
    if attempt <= fail_times:
        raise ConnectionError(f"attempt {attempt} fails")
    return attempt


@engine.step(retry=Retry(max_attempts=5, delay=2.0, backoff=1.0))
async def flaky_later(fail_times: int) -> int:
    attempt = current_step().attempt
    if attempt <= fail_times:
        raise ConnectionError(f"attempt {attempt} fails")
    return attempt


@engine.workflow
async def flaky(spec: Flaky) -> int:
    if spec.parked:
        return await flaky_later(spec.fail_times)
    return await flaky_soon(spec.fail_times)
