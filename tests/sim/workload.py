"""The simulated workload: real workflows on a real :class:`~raftflow.Engine` registry.

Every step logs its run (execution, index, attempt, process, start, end) in the current
simulation and returns its run's number, so the checker can tell which run each step
record came from. Step code stands still while its process is stopped and never ends if
its process is killed (:meth:`SimCluster.gate`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from raftflow.engine.workflow import drivers as drivers_module
from raftflow.engine.workflow.activation import Activation
from raftflow.engine.workflow.context import StepInfo
from raftflow.engine.workflow.transaction import AsyncTransaction
from sqlalchemy import Column, Integer, MetaData, String, Table, insert, select, update

from raftflow import Engine, RateLimit, Retry, current_step
from tests.sim.cluster import PROCESS
from tests.sim.timers import Reading

if TYPE_CHECKING:
    from tests.sim.sim import Simulation

engine = Engine()

#: The simulation running now (one at a time per process).
CURRENT: list[Simulation] = []


@dataclass
class Run:
    """One run of a step's code."""

    id: int
    execution: str
    index: int
    attempt: int
    process: str
    start: float
    end: float | None = None
    ok: bool = True
    #: Whether its activation still held the execution's lease when it started (False: a
    #: zombie run -- its lease lapsed and was taken over; its result will be refused).
    held: bool = True
    #: The token of the lease it ran under, when held (one claim of the execution).
    lease: str | None = None
    step: str = ""
    #: The last timer its process honoured for the execution before it ran (a retry's
    #: wake time, a sleep's): what it waited for (tests/sim/timers.py).
    honoured: Reading | None = None
    entered: float = 0.0  # when its code was called (``start``: after its process's gate)
    #: How far the reference its process's clock follows was off then (tests/sim/timers.py).
    reference: float | None = None
    generation: int = 1  # the run of the execution (one more at each continue_as_new)


@dataclass
class RunLog:
    runs: list[Run] = field(default_factory=list)
    #: The activation running each step now, by its StepInfo (id: it has no weak refs).
    owners: dict[int, tuple[StepInfo, Activation]] = field(default_factory=dict)

    @contextlib.contextmanager
    def attributed(self) -> Iterator[None]:
        """Note which activation runs each step (the engine's step path, wrapped): a run
        is then checked against its own activation's lease, not a guess among them."""
        original = drivers_module._step_code
        owners = self.owners

        @contextlib.contextmanager
        def step_code(run: Activation, info: StepInfo, outcome: Any) -> Iterator[None]:
            owners[id(info)] = (info, run)
            try:
                with original(run, info, outcome):
                    yield
            finally:
                owners.pop(id(info), None)

        drivers_module._step_code = step_code
        try:
            yield
        finally:
            drivers_module._step_code = original

    async def run(self, fail: bool = False, short: bool = False) -> int:
        sim = CURRENT[-1]
        info = current_step()
        who = PROCESS.get()
        loop = asyncio.get_running_loop()
        entered = loop.time()
        await sim.cluster.gate(who)
        run = Run(len(self.runs), info.execution_id, info.index, info.attempt, who, loop.time())
        run.step, run.entered = info.name, entered
        run.reference = sim.timers.reference(sim.clock_of(who, info.execution_id), who)
        run.honoured = sim.timers.honoured.get((who, info.execution_id))
        owner = self.owners.get(id(info))
        if owner is None:
            # Its attempt is over already: a sync step's thread that its timeout cut while
            # its process was stopped goes on in the overrun pool; its result is dropped.
            run.held = False
        elif owner[0] is info:  # the activation running this step
            run.generation = owner[1].record.run
            token = owner[1].lease.token
            run.held = bool(
                sim.everywhere.query(
                    "SELECT 1 FROM messages WHERE group_id = ? AND locked_by = ?",
                    (info.execution_id, token),
                )
            )
            run.lease = token if run.held else None
        self.runs.append(run)
        held = "" if run.held else ", its lease lost"
        sim.note(f"{who} run {run.id}: {run.execution}#{run.index} attempt {run.attempt}{held}")
        try:
            await asyncio.sleep(0.0 if short else sim.rng.uniform(0.0, sim.plan.step_time))
            await sim.cluster.gate(who)
        except asyncio.CancelledError:
            run.end, run.ok = loop.time(), False
            sim.note(f"{who} run {run.id} cancelled")
            raise
        run.end = loop.time()
        sim.note(f"{who} run {run.id} ends")
        if fail:
            run.ok = False
            raise ValueError(f"run {run.id} fails")
        return run.id


class Chain(BaseModel):
    steps: int


@engine.step
async def work() -> int:
    return await CURRENT[-1].runs.run()


#: Each retried step's delay before its next attempt (backoff 1: constant), for the checker.
RETRY_DELAYS = {"flaky": 0.5, "deposit": 0.2, "sflaky": 0.5, "sdeposit": 0.2}


@engine.step(retry=Retry(max_attempts=4, delay=0.5, backoff=1.0, on=(ConnectionError,)))
async def flaky() -> int:
    info = current_step()
    if info.attempt == 1:
        try:
            await CURRENT[-1].runs.run(fail=True)
        except ValueError:
            raise ConnectionError("first attempt fails") from None
    return await CURRENT[-1].runs.run()


@engine.step
async def doom() -> int:
    return await CURRENT[-1].runs.run(fail=True)


@engine.step
async def stamp() -> list[float]:
    run_id = await CURRENT[-1].runs.run(short=True)
    return [run_id, asyncio.get_running_loop().time()]


@engine.workflow
async def chain(spec: Chain) -> list[int]:
    return [await work() for _ in range(spec.steps)]


@engine.workflow
async def retried(spec: Chain) -> list[int]:
    first = await work()
    return [first, await flaky(), *[await work() for _ in range(spec.steps)]]


@engine.workflow
async def doomed(spec: Chain) -> list[int]:
    done = [await work() for _ in range(spec.steps)]
    return [*done, await doom()]


class Nap(BaseModel):
    seconds: float


#: The named queue of the workflows that wait (sleeps, signals); the rest are in "default".
#: Seeds where workers serve different queues (tests/sim/sim.py, ``serve_queues``) check
#: that each runs only what it serves (tests/sim/invariants.py).
WAITS = "waits"


@engine.workflow(queue=WAITS)
async def napper(nap: Nap) -> list[Any]:
    before = await stamp()
    await engine.sleep_async(nap.seconds)
    after = await stamp()
    return [before, after]


class Listen(BaseModel):
    messages: int


@engine.workflow(queue=WAITS)
async def listener(spec: Listen) -> list[Any]:
    got = []
    for _ in range(spec.messages):
        got.append(await engine.recv_async("m", timeout=None))
        await work()
    return got


@engine.workflow
async def parent(spec: Chain) -> list[Any]:
    first = await work()
    child = await engine.start_async(chain, spec)
    result = await child.result_async()
    return [first, result, await work()]


# -- transaction steps: a ledger --------------------------------------------------------------
# Each account belongs to one execution; every deposit is a transaction step that inserts its
# ledger row (named by the execution and the step's index) and adds its amount to the balance,
# in the request that records the step. The checker: each recorded deposit has exactly one
# ledger row, no ledger row lacks its record, every balance is the sum of its rows.

metadata = MetaData()
accounts = Table(
    "sim_accounts",
    metadata,
    Column("id", String, primary_key=True),
    Column("balance", Integer, nullable=False),
)
ledger = Table(
    "sim_ledger",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("execution_id", String, nullable=False),
    Column("idx", Integer, nullable=False),
    Column("amount", Integer, nullable=False),
    Column("run", Integer, nullable=False),
)


class Banking(BaseModel):
    deposits: list[int]


@engine.transaction
async def open_account(tx: AsyncTransaction) -> int:
    run_id = await CURRENT[-1].runs.run(short=True)
    tx.execute(insert(accounts).values(id=current_step().execution_id, balance=0))
    return run_id


@engine.transaction(retry=Retry(max_attempts=3, delay=0.2, backoff=1.0))
async def deposit(tx: AsyncTransaction, amount: int) -> int:
    info = current_step()
    before = await tx.scalar(select(accounts.c.balance).where(accounts.c.id == info.execution_id))
    run_id = await CURRENT[-1].runs.run()
    write_deposit(tx, info, amount, run_id, before)
    return run_id


def write_deposit(tx: Any, info: Any, amount: int, run_id: int, before: Any) -> None:
    """A deposit's writes (its ledger row, the balance, guarded) and its trace line: the
    same in the async and the sync banker (tests/sim/workload_sync.py)."""
    tx.execute(
        insert(ledger).values(
            execution_id=info.execution_id, idx=info.index, amount=amount, run=run_id
        )
    )
    tx.execute(
        update(accounts)
        .where(accounts.c.id == info.execution_id)
        .values(balance=accounts.c.balance + amount),
        expect_rows=1,
    )
    CURRENT[-1].note(f"deposit {info.execution_id}#{info.index}: {amount} (read {before})")


@engine.workflow
async def banker(spec: Banking) -> list[int]:
    runs = [await open_account()]
    for amount in spec.deposits:
        runs.append(await deposit(amount))
        await work()
    return runs


# -- concurrency limits ---------------------------------------------------------------------
# At most 2 executions of a key hold a slot at once (the cluster checks the database after
# every write: admitted executions not final, and live leases, per key).


class Limited(BaseModel):
    key: str
    steps: int


@engine.workflow(concurrency=2, concurrency_key=lambda spec: spec.key)
async def limited(spec: Limited) -> list[int]:
    return [await work() for _ in range(spec.steps)]


# -- rate limits ----------------------------------------------------------------------------
# At most 2 starts of `rated` per second: the reserved start times in `rate_slots` are
# checked (never more than 2 in any second), and every run starts no earlier than its slot.

RATE = RateLimit(2, per=1.0)


@engine.step(rate_limit=RATE)
async def rated() -> int:
    return await CURRENT[-1].runs.run()


@engine.workflow
async def throttled(spec: Chain) -> list[int]:
    return [await rated() for _ in range(spec.steps)]


# The sync kinds and the sharded seeds' workflow register on the same engine (they import
# this module's names).
from tests.sim import workload_shards, workload_sync  # noqa: E402, F401
