"""The simulation's client: starts, signals, cancels, debounced starts, resumes and forks.

It runs in its own process (``client``) with its own connection and clock, and retries
whatever fails on the infrastructure (every request it makes is idempotent). An execution
planned ``via`` a worker is started in that worker's process instead, through
``Engine.start`` -- the start fast path: its first event is published leased to that
worker, which runs it at once. A failing execution of the ``fragile`` and ``forked`` kinds
is recovered, once it failed, by an operator task: the "fix" is deployed, then the
execution is resumed, or forked from its failed step.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from raftflow.engine.runtime.run import WorkerRun
from raftflow.engine.workflow.events import RUN
from raftflow.stores.store import SqlStore
from raftflow.transports.db.flow import Flow

from raftflow.errors import ExecutionFinishedError, StoreError
from tests.sim import split, workload
from tests.sim.workload_more import DEBOUNCE, FORK, WORKFLOWS

if TYPE_CHECKING:
    from tests.sim.plan import Planned
    from tests.sim.sim import Simulation

#: Seconds the client waits for a start made in a worker's process before it starts the
#: execution itself (the process may have been killed or stopped meanwhile).
FAST_START_WAIT = 10.0


@contextlib.contextmanager
def adoptions(sim: Simulation) -> Iterator[None]:
    """Note each execution handed to a worker at its start (the fast path), and to which."""
    original = WorkerRun.adopt

    def adopt(self: Any, claimed: Any) -> None:
        sim.adopted[claimed.lease.group_id] = self.worker_id
        original(self, claimed)

    WorkerRun.adopt = adopt  # type: ignore[method-assign]
    try:
        yield
    finally:
        WorkerRun.adopt = original  # type: ignore[method-assign]


class Client:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        #: One per cluster (a sharded seed has several): each request goes to its execution's.
        self.backends = (
            split.client_backends(sim)
            if sim.split
            else [SqlStore(sim.database("client", i)).to_async() for i in range(len(sim.clusters))]
        )
        self.operators: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        sim = self.sim
        loop = asyncio.get_running_loop()
        actions: list[tuple[float, int, str, Planned, int]] = []
        for n, item in enumerate(sim.plan.executions):
            for k, (at, _) in enumerate(item.starts):
                actions.append((at, n, "start", item, k))
            if item.cancel_at is not None:
                actions.append((item.cancel_at, n, "cancel", item, 0))
            for k in range(item.messages):
                actions.append((item.at + sim.rng.uniform(0.0, 8.0), n, "send", item, k))
        actions.sort(key=lambda a: (a[0], a[1], a[2], a[4]))
        sends: dict[str, int] = {}
        for when, _, what, item, k in actions:
            await asyncio.sleep(max(0.0, when - loop.time()))
            if what == "start":
                await self.start(item, k)
                if k == 0 and item.workflow in ("fragile", "forked"):
                    self.operators.append(
                        loop.create_task(self.recover(item), name=f"operator {item.id}")
                    )
            elif what == "cancel":
                status = await self.retry(
                    partial(self.flows(item.id).cancel, item.id), f"cancel {item.id}", item.id
                )
                sim.note(f"client cancel {item.id}: {status}")
            else:
                n = sends.get(item.id, 0)
                sends[item.id] = n + 1
                await self.send(item, n)
        for operator in self.operators:
            await operator

    # -- starts -----------------------------------------------------------------------------

    async def start(self, item: Planned, k: int) -> None:
        sim = self.sim
        _, value = item.starts[k]
        definition = workload.engine.registry.workflow(WORKFLOWS.get(item.workflow, item.workflow))
        payload = definition.encode_input(value)
        loop = asyncio.get_running_loop()
        called = loop.time()
        if item.via is None or not await self.fast_start(item, value):
            await self.retry(
                partial(
                    self.flows(item.id).start,
                    item.id,
                    definition.name,
                    payload,
                    0,
                    RUN,
                    timeout=definition.timeout,
                    limit=workload.engine.registry.limit(definition, payload),
                    debounce=DEBOUNCE if item.workflow == "debounced" else None,
                    lane=workload.engine.registry.lane(definition),
                ),
                f"start {item.id}",
                item.id,
            )
            reference = sim.timers.reference(sim.clock_of("client", item.id), "client")
            item.started.append((called, loop.time(), value, reference, "client"))
        sim.note(f"client started {item.id} ({item.workflow}) with {value}")
        record = await self.retry(
            partial(self.flows(item.id).get, item.id), f"get {item.id}", item.id
        )
        if record is None:
            sim.violation(f"client: {item.id} not found right after its start was acknowledged")

    async def fast_start(self, item: Planned, value: Any) -> bool:
        """``Engine.start`` in worker ``item.via``'s process (the fast path), if that process
        answers; False: the client starts it itself (a start by id is idempotent)."""
        sim = self.sim
        who = f"w{item.via}"
        engine = sim.engines.get(who)
        if engine is None or sim.cluster.process(who).died_at is not None:
            return False
        workflow = WORKFLOWS.get(item.workflow, item.workflow)
        loop = asyncio.get_running_loop()
        called = loop.time()
        task = sim.spawn(who, engine.start_async(workflow, value, execution_id=item.id))
        done, _ = await asyncio.wait({task}, timeout=FAST_START_WAIT)
        # Given up on, it may still fail later (the infrastructure's faults): seen then.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        if not done or task.exception() is not None:
            error = "no answer" if not done else repr(task.exception())
            sim.note(f"client: {who} did not start {item.id} ({error}); starting it itself")
            return False
        reference = sim.timers.reference(sim.clock_of(who, item.id), who)
        item.started.append((called, loop.time(), value, reference, who))
        sim.note(f"{who} started {item.id} (created: {task.result().created})")
        return True

    # -- signals --------------------------------------------------------------------------

    async def send(self, item: Planned, k: int) -> None:
        sim = self.sim
        message = f"{item.id}-m{k}"
        try:
            await self.retry(
                partial(self.flows(item.id).send, item.id, message, "m", f"{item.id}-k{k}"),
                f"send {message}",
                item.id,
            )
        except ExecutionFinishedError:  # cancelled first: nobody will receive it
            sim.refused.setdefault(item.id, []).append(message)
            sim.note(f"client send {message} refused: {item.id} is finished")
            return
        sim.sent.setdefault(item.id, []).append(message)
        sim.note(f"client sent {message}")

    # -- recovery: resume, fork -------------------------------------------------------------

    async def recover(self, item: Planned) -> None:
        """Once ``item`` failed, deploy the fix and resume it (``fragile``) or fork it from
        its failed step (``forked``)."""
        sim = self.sim
        while True:
            record = await self.retry(
                partial(self.flows(item.id).get, item.id), f"get {item.id}", item.id
            )
            if record is not None and record.status.value == "failed":
                break
            await asyncio.sleep(1.0)
        sim.fixed.add(item.id)
        loop = asyncio.get_running_loop()
        item.recovered_at = loop.time()  # from this call on, the step may run again
        if item.workflow == "fragile":
            resumed = await self.retry(
                partial(self.flows(item.id).resume, item.id, RUN), f"resume {item.id}", item.id
            )
            sim.note(f"client resumed {item.id}: {resumed}")
        else:
            failed_step = item.input["steps"]
            await self.retry(
                partial(self.flows(item.id).fork, item.id, failed_step, item.id + FORK, RUN),
                f"fork {item.id}",
                item.id,
            )
            sim.note(f"client forked {item.id} from step {failed_step}")

    # -- every request ----------------------------------------------------------------------

    def flows(self, execution_id: str) -> Any:
        """The store flows of the cluster that holds ``execution_id``."""
        return self.backends[self.sim.route(execution_id)].flows

    async def retry(self, make: Callable[[], Flow[Any]], what: str, on: str) -> Any:
        """A client request to the cluster of execution ``on``, again after an
        infrastructure failure (all are idempotent)."""
        backend = self.backends[self.sim.route(on)]
        while True:
            try:
                return await backend.run(make())
            except StoreError:
                raise
            except Exception as exc:
                self.sim.note(f"client {what} failed, retrying: {type(exc).__name__}")
                await asyncio.sleep(0.5)
