"""One seed of the deterministic simulation: its plan, its run, its checks.

``Simulation(seed).run()`` draws everything from ``random.Random(seed)`` -- the fault rates,
the workers and their options, the workload, every request's fate and latency, every
step's duration, when workers are killed or stopped -- runs real :class:`~raftflow.Worker`
sessions on a :class:`~tests.sim.loop.SimLoop` against a :class:`~tests.sim.cluster.
SimCluster` (in a sharded seed several: tests/sim/shards.py), then checks the invariants.
Same seed, same trace, byte for byte.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import random
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from raftflow.engine import Engine
from raftflow.engine.runtime.worker import Worker
from raftflow.engine.workflow.transaction import create_tables_request
from raftflow.stores.store import SqlStore
from raftflow.transports.db.clock import ClusterClock
from raftflow.transports.db.database import Database
from raftflow.transports.queue import QUERIES
from raftflow.transports.rqlite.protocol import RqliteConfig
from raftflow.transports.transport import SqlTransport

from tests.sim import shards, split, workload
from tests.sim.client import Client, adoptions
from tests.sim.cluster import (
    NODES,
    PROCESS,
    SimCluster,
    SimConnection,
    SyncSimConnection,
)
from tests.sim.logs import captured_logs, quiet_unraisable
from tests.sim.loop import SimLoop
from tests.sim.mutations import MUTATIONS
from tests.sim.plan import make_plan, serve_queues
from tests.sim.pressure import Pressure
from tests.sim.threads import Lockstep
from tests.sim.timers import TimerProbe
from tests.sim.verdicts import catching

#: Simulated seconds after which an unfinished execution counts as stuck.
TIME_LIMIT = 1200.0
FINAL = ("succeeded", "failed", "cancelled")


def process_engine(database: Database, cron: bool) -> Engine:
    """A worker process's Engine: the workload's registry, a transport and a store of its
    own on one connection (each simulated process has its own connection and cluster
    clock), its own workers (for the start fast path), and the cron schedule in the seeds
    that have one."""
    engine = Engine(  # the simulated workload keeps its executions: no retention
        transport=SqlTransport(database), store=SqlStore(database), retention=None
    )
    engine.registry = workload.engine.registry
    engine.hooks = workload.engine.hooks
    engine.schedules = dict(workload.engine.schedules) if cron else {}
    return engine


@dataclass
class Result:
    seed: int
    violations: list[str]
    trace: list[str]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()


class Simulation:
    def __init__(
        self,
        seed: int,
        *,
        size: int = 6,
        mutation: str | None = None,
        verbose: bool = False,
        until_caught: bool = False,
    ) -> None:
        self.seed = seed
        #: Stop the run once a violation catches the mutation (tests/sim/table.py).
        self.until_caught = until_caught
        self.rng = random.Random(seed)
        self.plan = serve_queues(make_plan(self.rng, size), seed)
        self.pressure = Pressure(seed)  # on the fences: an RNG of its own (tests/sim/pressure.py)
        self.mutation = MUTATIONS[mutation] if mutation else None
        self.verbose = verbose
        self.trace: list[str] = []
        self.violations: list[str] = []
        self.runs = workload.RunLog()
        self.workers: dict[str, Worker] = {}
        self.engines: dict[str, Engine] = {}  # each worker process's, by process
        self.clocks: dict[str, Any] = {}  # each process's cluster clock
        self.fires: list[tuple[str, str]] = []  # (time, execution) of each run of `tick`
        self.fixed: set[str] = set()  # executions whose failing step was "fixed"
        #: Executions handed to a worker at their start (the fast path), and to which one.
        self.adopted: dict[str, str] = {}
        self.sent: dict[str, list[str]] = {}
        self.refused: dict[str, list[str]] = {}  # sends refused: the execution was finished
        self.loop = SimLoop()
        self.lockstep = Lockstep(self.loop)
        rewrite = self.mutation.rewrite if self.mutation else None
        self.cluster = SimCluster(
            self.loop,
            create_tables_request(workload.metadata),
            self.rng,
            self.plan.faults,
            self.note,
            rewrite,
            self.violation,
        )
        self.timers = TimerProbe(self.loop.time, self.cluster.clock_answers, self.local_offset)
        # Fences: stalls right before writes under a lease; those writes audited (the
        # ledger's rows are a transaction step's writes, under its lease too).
        self.pressure.attach(self)
        self.cluster.stall = self.pressure.stall
        self.cluster.on_claim = self.pressure.taken_over
        self.cluster.audit.tables = ((workload.ledger.name, "execution_id"),)
        # A sharded seed (tests/sim/shards.py): its other clusters, faults of their own.
        self.sharding = shards.draw(seed, self.plan)
        # A split seed (tests/sim/split.py): the state on a second cluster, the queue here.
        drawn = split.draw(seed, self.plan) if self.sharding is None else None
        self.split = drawn is not None
        self.clusters = [self.cluster]
        self.shard_clocks: dict[tuple[str, int], Any] = {}  # each process's, per cluster
        if self.sharding is not None:
            self.note(self.sharding.describe())
            self.clusters = self.sharding.clusters_of(self, self.cluster)
            self.sent.update({peer: [m] for peer, m in self.sharding.inboxes.items()})
            for cluster in self.clusters[1:]:
                cluster.on_claim = self.cluster.on_claim
                cluster.audit.tables = self.cluster.audit.tables
        if drawn is not None:
            self.plan, faults = drawn
            self.note(split.describe(faults))
            self.clusters = split.clusters_of(self, self.cluster, faults)
        self.everywhere = shards.Everywhere(self.clusters)

    # -- the record -------------------------------------------------------------------------

    def note(self, line: str) -> None:
        text = f"{self.loop.time():10.4f} {line}"
        self.trace.append(text)
        if self.verbose:
            print(text)

    def violation(self, message: str) -> None:
        self.note(f"VIOLATION {message}")
        self.violations.append(message)

    def check_dropped_lease(self, execution_id: str) -> None:
        """The heartbeat gave up a lease: it must really be lost (no live lease of that
        activation's token in the database)."""
        who = PROCESS.get()
        worker = self.workers.get(who)
        runs = worker._runs if worker is not None else []
        for activation in [a for run in runs for a in run.dispatch.activations]:
            if activation.execution_id != execution_id or activation.held:
                continue  # not the one just dropped (held is cleared right before the log)
            leases = self.clusters[0] if self.split else self.everywhere  # not the mirrors
            rows = leases.query(
                "SELECT seq FROM messages WHERE group_id = ? AND locked_by = ?",
                (execution_id, activation.lease.token),
            )
            if rows:
                self.violation(
                    f"{who} dropped its live lease of {execution_id} (message "
                    f"{rows[0]['seq']}; it took its lease for message {activation.lease.seq})"
                )

    # -- the run ----------------------------------------------------------------------------

    def run(self) -> Result:
        with self._deterministic_ids(), captured_logs(self):
            workload.CURRENT.append(self)
            try:
                self.loop.run_until_complete(self._main())
                for problem in self.loop.unexpected():
                    self.violation(f"unhandled in the simulation: {problem}")
            finally:
                workload.CURRENT.pop()
                self._close_loop()
        if not self.violations:
            self._check()
        stats = {
            "requests": self.cluster.counters.requests,
            "faults": dict(sorted(self.cluster.counters.faults.items())),
            "executions": len(self.plan.executions),
            "step_runs": len(self.runs.runs),
            "simulated_seconds": round(self.end_time, 3),
            "mutated": self.cluster.counters.mutated,
        }
        return Result(self.seed, self.violations, self.trace, stats)

    @contextlib.contextmanager
    def _deterministic_ids(self) -> Iterator[None]:
        ids = random.Random(self.rng.getrandbits(64))
        original = uuid.uuid4
        uuid.uuid4 = lambda: uuid.UUID(int=ids.getrandbits(128), version=4)  # type: ignore[assignment]
        try:
            yield
        finally:
            uuid.uuid4 = original  # type: ignore[assignment]

    def _close_loop(self) -> None:
        """Drop what is left (the tasks of killed workers wait forever) without a word."""
        loop = self.loop
        hook = sys.unraisablehook
        sys.unraisablehook = lambda unraisable: None
        try:
            self.lockstep.close()
            for task in loop.tasks():  # in creation order: the cancels run in that order
                task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(asyncio.sleep(0.001))
            loop.close()
            self.workers.clear()
        finally:
            sys.unraisablehook = quiet_unraisable(hook)

    def local_offset(self, who: str, at: float) -> float:
        """How far process ``who``'s local clock is off the true time at ``at`` (its skew,
        and its clock jumps by then)."""
        index = int(who[1:]) if who.startswith("w") else len(self.plan.options) - 1
        jumps = sum(by for when, i, by in self.plan.clock_jumps if i == index and at >= when)
        return self.plan.clock_skews[index] + jumps

    def route(self, execution_id: str) -> int:
        """The index of the cluster that holds ``execution_id`` (0 in an unsharded seed; the
        state's in a split one)."""
        if self.split:
            return split.STATE
        return 0 if self.sharding is None else self.sharding.index_of(execution_id)

    def clock_of(self, who: str, execution_id: str) -> Any:
        """Process ``who``'s cluster clock of the cluster that holds ``execution_id``."""
        return self.shard_clocks.get((who, self.route(execution_id)))

    def database(self, who: str, index: int = 0) -> Database:
        """A new database connection for process ``who`` to cluster ``index`` (its own
        cluster clock)."""
        nodes = NODES if index == 0 else tuple(n.replace("//n", f"//s{index}n") for n in NODES)
        config = RqliteConfig(nodes=nodes, timeout=1.0, retry_timeout=3.0)

        def local_time() -> float:
            now = self.loop.time()
            return now + self.local_offset(who, now)

        clock = ClusterClock(QUERIES("clock"), resync=5.0, local_time=local_time)
        if index == 0:
            self.clocks[who] = clock
        self.shard_clocks[(who, index)] = clock
        connection = SimConnection(self.clusters[index], who, config)
        sync = SyncSimConnection(connection, self.lockstep)
        return Database(sync, clock)  # type: ignore[arg-type]

    def spawn(self, who: str, coroutine: Any) -> asyncio.Task[Any]:
        """A task of process ``who``."""
        context = contextvars.copy_context()
        context.run(PROCESS.set, who)
        return self.loop.create_task(coroutine, context=context)

    def _start_worker(self, index: int) -> None:
        self.spawn(f"w{index}", self._supervise(index))

    async def _supervise(self, index: int) -> None:
        """Run a worker process; restart it a second after it exits on an error (as
        systemd's Restart=on-failure or Kubernetes would)."""
        who = f"w{index}"
        while True:
            if self.split:
                engine = split.engine(self, who)
            else:
                engine = process_engine(self.database(who), self.plan.cron)
            if self.sharding is not None:
                engine = self.sharding.engine(self, who, engine)
            self.engines[who] = engine
            worker = Worker(engine, self.plan.options[index])
            self.workers[who] = worker
            self.note(f"{who} started")
            try:
                await worker.run()
                return
            except Exception as exc:
                self.note(f"{who} exited: {type(exc).__name__}: {str(exc)[:100]}; restarted in 1s")
            await asyncio.sleep(1.0)

    async def _main(self) -> None:
        plan = self.plan
        self.end_time = 0.0
        patch = self.mutation.patch() if self.mutation else contextlib.nullcontext()
        schema = contextlib.ExitStack()
        for cluster in self.clusters if self.mutation else ():
            schema.enter_context(self.mutation.schema(cluster))  # type: ignore[union-attr]
        with (
            patch,
            schema,
            self.timers.installed(),
            self.lockstep.installed(PROCESS),
            self.runs.attributed(),
            adoptions(self),
        ):
            for index in range(plan.workers):
                self._start_worker(index)
            client = self.spawn("client", self._client())
            self.spawn("chaos", self._chaos())
            self.spawn("chaos", self.pressure.chaos(self))
            loop = asyncio.get_running_loop()
            while loop.time() < TIME_LIMIT:
                await asyncio.sleep(1.0)
                if loop.time() >= plan.calm_at and not self.cluster.calm:
                    for cluster in self.clusters:
                        cluster.calm = True
                    self.note("calm: no more network faults")
                if client.done() and self._all_final():
                    break
                if self.until_caught and catching(self.mutation, self.violations):
                    break
            self.end_time = loop.time()
            self.note("workload over")
            if client.done() and client.exception() is not None:
                self.violation(f"the client failed: {client.exception()!r}")
            for who, worker in self.workers.items():
                if self.cluster.process(who).died_at is None:
                    worker.stop()
            await asyncio.sleep(2.0)

    async def _client(self) -> None:
        client = Client(self)
        await client.run()
        await self.pressure.after_client(self, client.retry)  # strays: tests/sim/pressure.py

    def _all_final(self) -> bool:
        """Every execution finished (sharded: and every outbox delivered)."""
        rows = self.everywhere.query(
            "SELECT 1 FROM executions WHERE status NOT IN "
            "('succeeded', 'failed', 'cancelled', 'continued') LIMIT 1"
        )
        return not rows and (self.sharding is None or self.everywhere.outboxes_empty())

    async def _chaos(self) -> None:
        """Kill (and replace) and stop workers at the planned times."""
        events: list[tuple[float, str, int, float]] = [
            (t, "kill", i, 0.0) for t, i in self.plan.kills
        ]
        events += [(t, "pause", i, d) for t, i, d in self.plan.pauses]
        events += [(t, "jump", i, by) for t, i, by in self.plan.clock_jumps]
        events.sort()
        loop = asyncio.get_running_loop()
        spare = self.plan.workers
        for when, what, index, duration in events:
            await asyncio.sleep(max(0.0, when - loop.time()))
            process = self.cluster.process(f"w{index}")
            if process.died_at is not None:
                continue
            if what == "jump":
                self.note(f"w{index}'s clock jumps by {duration:+.0f}s")
            elif what == "kill":
                process.died_at = loop.time()
                self.note(f"w{index} killed (kill -9)")
                if spare < len(self.plan.options):
                    self._start_worker(spare)
                    spare += 1
            else:
                process.paused_until = max(process.paused_until, loop.time() + duration)
                self.note(f"w{index} stopped for {duration:.2f}s (SIGSTOP)")

    # -- the invariants -----------------------------------------------------------------------

    def _check(self) -> None:
        from tests.sim.invariants import check

        for message in check(self):
            self.violation(message)
        if self.sharding is not None:
            for message in shards.check(self, self.sharding):
                self.violation(message)
        if self.split:
            for message in split.leftovers(self):
                self.violation(message)


def run_seed(seed: int, **options: Any) -> Result:
    return Simulation(seed, **options).run()
