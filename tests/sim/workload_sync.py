"""The workload's sync kinds: sync workflows and sync steps, run in the engine's threads
(in lockstep with the loop: tests/sim/threads.py).

The twins of the async kinds -- a chain, a retried step, a durable sleep between two time
stamps, a listener, a parent and its child, a banker of transaction steps -- with the
same checks; and an async workflow calling sync steps (``asyncio.to_thread``). A sync
step logs its run like an async one, waiting for the loop from its thread.
"""

from __future__ import annotations

from typing import Any

from raftflow.engine.workflow.transaction import Transaction
from sqlalchemy import insert, select

from raftflow import Retry, current_step
from tests.sim.workload import (
    CURRENT,
    WAITS,
    Banking,
    Chain,
    Listen,
    Nap,
    accounts,
    engine,
    write_deposit,
)

#: Each sync kind, and the async kind whose input and checks it shares.
SHAPES = {
    "schain": "chain",
    "sretried": "retried",
    "snapper": "napper",
    "slistener": "listener",
    "sparent": "parent",
    "sbanker": "banker",
    "tochain": "chain",
}


def _run(fail: bool = False, short: bool = False) -> int:
    sim = CURRENT[-1]
    run_id: int = sim.lockstep.run(sim.runs.run(fail=fail, short=short))
    return run_id


@engine.step
def swork() -> int:
    return _run()


@engine.step(retry=Retry(max_attempts=4, delay=0.5, backoff=1.0, on=(ConnectionError,)))
def sflaky() -> int:
    if current_step().attempt == 1:
        try:
            _run(fail=True)
        except ValueError:
            raise ConnectionError("first attempt fails") from None
    return _run()


@engine.step
def sstamp() -> list[float]:
    run_id = _run(short=True)
    return [run_id, CURRENT[-1].loop.time()]


@engine.workflow
def schain(spec: Chain) -> list[int]:
    return [swork() for _ in range(spec.steps)]


@engine.workflow
def sretried(spec: Chain) -> list[int]:
    first = swork()
    return [first, sflaky(), *[swork() for _ in range(spec.steps)]]


@engine.workflow(queue=WAITS)
def snapper(nap: Nap) -> list[Any]:
    before = sstamp()
    engine.sleep(nap.seconds)
    after = sstamp()
    return [before, after]


@engine.workflow(queue=WAITS)
def slistener(spec: Listen) -> list[Any]:
    got = []
    for _ in range(spec.messages):
        got.append(engine.recv("m", timeout=None))
        swork()
    return got


@engine.workflow
def sparent(spec: Chain) -> list[Any]:
    first = swork()
    child = engine.start(schain, spec)
    result = child.result()
    return [first, result, swork()]


@engine.workflow
async def tochain(spec: Chain) -> list[int]:
    """An async workflow whose steps are sync: each runs in a thread (asyncio.to_thread)."""
    return [await swork() for _ in range(spec.steps)]  # type: ignore[misc]


@engine.transaction
def sopen_account(tx: Transaction) -> int:
    run_id = _run(short=True)
    tx.execute(insert(accounts).values(id=current_step().execution_id, balance=0))
    return run_id


@engine.transaction(retry=Retry(max_attempts=3, delay=0.2, backoff=1.0))
def sdeposit(tx: Transaction, amount: int) -> int:
    info = current_step()
    before = tx.scalar(select(accounts.c.balance).where(accounts.c.id == info.execution_id))
    run_id = _run()
    write_deposit(tx, info, amount, run_id, before)
    return run_id


@engine.workflow
def sbanker(spec: Banking) -> list[int]:
    runs = [sopen_account()]
    for amount in spec.deposits:
        runs.append(sdeposit(amount))
        swork()
    return runs
