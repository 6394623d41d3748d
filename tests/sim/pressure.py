"""Pressure on the fences: what a seed adds to its plan so that stale writes happen often.

Every fence exists for one moment: a worker whose lease lapsed, and was taken over, writes
anyway. The plan's random pauses and network delays (tests/sim/sim.py) rarely land right
before such a write, and the base workload rarely batches commits, queues executions for a
slot or fires a schedule. So, drawn per seed from an RNG of its own (seeded from the seed: a
seed drawn with no pressure runs exactly as it would without this module, byte for byte):

- **stalls**: a worker process stops right before it sends a write under a lease -- a
  commit, an ack, a release, a heartbeat's extend, a schedule's fire -- for longer than
  its lease (a ``SIGSTOP``, a long GC pause, a VM migration at that moment; below);
- **a burst** (a quarter): every start within the first 0.3 s, workers with 4 slots and
  batches of 64, so commits of several executions go together (``lean_commit``,
  ``lean_finals``, the batched acks);
- **contention** (a quarter): 3-5 executions of the limited workflow on one key (2 slots);
- **strays** (3 seeds in 10): a run event published to 2-4 finished executions' groups, as
  an older release or an operator's tool may (the worker acks it: nothing to run);
- **a cron schedule** (a fifth, besides the plan's own): the workers run ``tick``
  (tests/sim/workload_more.py);
- **continued runs** (a fifth): 1-3 executions of ``looper`` ending 2-4 runs with
  ``continue_as_new``;
- **a drain** (a fifth): a worker stopped as by ``SIGTERM`` with a short drain deadline (it
  releases what it still holds: ``nack``), and a replacement;
- **a ledger** (a fifth): 2-3 executions of the banker (transaction steps), each cancelled
  0.1-3 s after its start, steps of up to 1.5 s, turns of 16 steps (a cancel lands during a
  deposit committed within a turn).

In every seed with an overlay, and half the others, writes under a lease are preceded by
stalls: a step's commit or a heartbeat's extend at the seed's rate (at most 4 times), a
write a run makes rarely (a batch, a continue, a fire, an ack, a release) half the time
(at most 4 times more) -- only while another worker is there to take the lease over. A
stall lasts 1-1.5 visibilities, or ends 0-2 ms after a claim takes that lease over: the
stale write then arrives while the new holder holds the lease (the moment every fence is
for).
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from raftflow.engine.runtime.schedules import SQL as SCHEDULES
from raftflow.engine.workflow.events import RUN
from raftflow.stores.flows import QUERIES as STORE
from raftflow.transports.db.flow import Request
from raftflow.transports.queue import QUERIES as QUEUE
from raftflow.transports.queue import QueueFlows

from tests.sim.audit import leases
from tests.sim.plan import Plan, Planned

if TYPE_CHECKING:
    from tests.sim.sim import Simulation

#: At most this many stalls per seed (each costs the run up to 1.5 visibilities).
MOST_STALLS = 4
#: Writes under a lease a run makes rarely (by catalogue name: a name gone fails here).
RARE = frozenset(
    {
        *(QUEUE(name).name for name in ("ack", "nack", "release_group")),
        *(STORE(name).name for name in ("lean_commit", "lean_finals", "continue")),
        SCHEDULES("fire").name,
    }
)
#: How often such a write is preceded by a stall (in a seed with stalls at all).
RARE_RATE = 0.5
#: Kinds the overlays may turn into another: not those whose checks count on their kind.
CHANGEABLE = ("chain", "retried", "napper", "listener", "parent", "limited", "throttled")


class Pressure:
    """One seed's pressure on the fences: its overlays, drawn at once, and its stalls."""

    def __init__(self, seed: int) -> None:
        rng = self.rng = random.Random(f"pressure {seed}")
        self.burst = rng.random() < 0.25
        self.contention = rng.random() < 0.25
        self.strays = rng.randint(2, 4) if rng.random() < 0.3 else 0
        self.cron = rng.random() < 0.2
        self.continued = rng.randint(1, 3) if rng.random() < 0.2 else 0
        self.drain = rng.random() < 0.2
        self.ledger = rng.random() < 0.2
        #: The chance that a write under a lease is preceded by a stall: in half the seeds
        #: with no overlay, in all those with one (what an overlay is for is a stale write).
        overlay = self.burst or self.strays or self.cron or self.continued or self.drain
        overlay = overlay or self.ledger
        low = 0.15 if overlay else 0.0
        self.stall_rate = max(low, rng.choice((0.0, 0.0, 0.0, 0.05, 0.15, 0.4)))
        self.stalls_left = self.rare_left = MOST_STALLS
        self.visibility = 0.0
        self.drain_at: tuple[float, int] | None = None
        self.drained: set[str] = set()
        #: Workers stopped before a write, and the leases that write names.
        self.stalled: list[tuple[str, list[Any]]] = []

    def describe(self) -> str:
        return (
            f"pressure: stalls {self.stall_rate:g}, burst {self.burst}, contention "
            f"{self.contention}, strays {self.strays}, cron {self.cron}, continued "
            f"{self.continued}, drain {self.drain}, ledger {self.ledger}"
        )

    def attach(self, sim: Simulation) -> None:
        """Shape ``sim``'s plan with this seed's overlays (before anything runs)."""
        self.sim = sim
        self.shape(sim.plan)
        if self.stall_rate:  # a seed with none has the trace it had before this module
            sim.note(self.describe())

    def shape(self, plan: Plan) -> None:
        self.visibility = plan.options[0].visibility
        rng = self.rng
        plan.cron = plan.cron or self.cron
        if self.drain:
            last = max(item.at for item in plan.executions)
            self.drain_at = (rng.uniform(0.5, last + 4), rng.randrange(plan.workers))
            timeout = rng.uniform(0.05, 0.5)
            plan.options = [replace(o, drain_timeout=timeout) for o in plan.options]
        if self.burst:
            plan.step_time = 0.05
            for n in range(len(plan.executions), 2 * len(plan.executions)):
                value = {"steps": rng.randint(1, 4)}
                at = rng.uniform(0.0, 0.3)
                plan.executions.append(Planned(f"e{n}", "chain", value, at, starts=[(at, value)]))
            last = max(0.3, *(start for p in plan.executions for start, _ in p.starts))
            for item in plan.executions:
                shift = item.at - item.at * 0.3 / last
                item.at -= shift
                item.starts = [(at * 0.3 / last, value) for at, value in item.starts]
                if item.cancel_at is not None:
                    item.cancel_at -= shift
            plan.options = [replace(o, concurrency=4, max_batch=64) for o in plan.options]
        changeable = [item for item in plan.executions if item.workflow in CHANGEABLE]
        rng.shuffle(changeable)
        if self.contention:
            for item in changeable[: rng.randint(3, 5)]:
                become(item, "limited", {"key": "k0", "steps": rng.randint(1, 4)})
            changeable = changeable[5:]
        for item in changeable[: self.continued]:
            become(item, "looper", {"left": rng.randint(2, 4)})
        changeable = changeable[self.continued :]
        if self.ledger:  # deposits committed within a turn (lean), long enough to be hit
            plan.step_time = 1.5
            plan.options = [replace(o, steps_per_turn=16) for o in plan.options]
            for item in changeable[: rng.randint(2, 3)]:
                deposits = [rng.randint(1, 100) for _ in range(rng.randint(2, 4))]
                become(item, "banker", {"deposits": deposits})
                item.cancel_at = item.at + rng.uniform(0.1, 3.0)

    def taken_over(self) -> None:
        """After a claim: a worker stalled before a write under a lease that this claim
        took over continues at once -- its write arrives stale, while the new holder
        still holds it (the worst moment for every fence; without a takeover the stall
        lasts its time)."""
        cluster = self.sim.cluster
        now = self.sim.loop.time()
        still = []
        for who, stale in self.stalled:
            if cluster.process(who).paused_until <= now:
                continue
            if any(self._taken(lease) for lease in stale):
                cluster.resume(who, now + self.rng.uniform(0.0, 0.002))
                self.sim.note(f"{who} continues: its lease was taken over")
            else:
                still.append((who, stale))
        self.stalled = still

    def _taken(self, lease: Any) -> bool:
        if lease.seq is not None:
            where, args = "seq = ?", (lease.seq,)
        else:
            where, args = "group_id = ?", (lease.group,)
        rows = self.sim.everywhere.query(f"SELECT locked_by FROM messages WHERE {where}", args)
        return any(r["locked_by"] not in (None, "__parked__", lease.token) for r in rows)

    def _works(self, process: Any, who: str) -> bool:
        """``process`` is another worker, alive and not drained."""
        name = process.name
        return (
            name != who
            and name.startswith("w")
            and process.died_at is None
            and name not in self.drained
        )

    async def chaos(self, sim: Simulation) -> None:
        """A worker stopped as by ``SIGTERM``: it drains (its running steps have a short
        deadline), releases what it still holds and exits; a replacement starts."""
        if self.drain_at is None:
            return
        when, index = self.drain_at
        await asyncio.sleep(max(0.0, when - sim.loop.time()))
        who = f"w{index}"
        worker = sim.workers.get(who)
        if worker is None or sim.cluster.process(who).died_at is not None:
            return
        sim.note(f"{who} stopped (SIGTERM: it drains)")
        self.drained.add(who)
        worker.stop()
        sim._start_worker(sim.plan.workers + 1)  # the kill's replacement takes workers + 0

    def stall(self, who: str, request: Request) -> float:
        """How long ``who`` stops before sending ``request`` (0: not at all)."""
        if not self.stall_rate or not who.startswith("w"):
            return 0.0
        names = {s.name for s in request.statements if leases(s)}
        if not names:
            return 0.0
        # A write that is rare in a run (a batch, a continue, a fire, an ack...) stops its
        # worker more often, from a budget of its own: most of a run's writes under a
        # lease are its step commits and heartbeats.
        rare = bool(names & RARE)
        if rare and (not self.rare_left or self.rng.random() >= RARE_RATE):
            return 0.0
        if not rare and (not self.stalls_left or self.rng.random() >= self.stall_rate):
            return 0.0
        # Someone must be there to take the lease over: another worker that runs (for a
        # rare write, one stopped may do: its own write, stale too, may meet this one's).
        now = self.sim.loop.time()
        others = [p for p in self.sim.cluster.processes.values() if self._works(p, who)]
        if not any(rare or p.paused_until <= now for p in others):
            return 0.0
        if rare:
            self.rare_left -= 1
        else:
            self.stalls_left -= 1
        self.stalled.append((who, [lease for s in request.statements for lease in leases(s)]))
        # Past the lease's end (a heartbeat leaves it at least half a visibility) and the
        # others' next poll: sometimes just after another took it over, sometimes long after.
        pause = self.visibility * self.rng.uniform(1.0, 1.5) + self.rng.uniform(0.3, 1.3)
        # A pause like the plan's own (the checks that allow for a stopped worker see it).
        self.sim.plan.pauses.append((now, int(who[1:]), pause))
        return pause

    async def after_client(self, sim: Simulation, retry: Any) -> None:
        """The client's last acts: a run event published to finished executions' groups,
        then it waits until the workers took them away (acked: nothing to run)."""
        if not self.strays:
            return
        ids = [item.id for item in self.rng.sample(sim.plan.executions, self.strays)]
        for execution_id in ids:
            while not sim.everywhere.query(FINAL_SQL, (execution_id,)):
                await asyncio.sleep(0.5)
            key = f"stray-{execution_id}"
            # Run by the client's own connection to the execution's cluster.
            queue = QueueFlows(sim.clock_of("client", execution_id))
            flow = partial(queue.publish, execution_id, RUN, key=key)
            await retry(flow, f"stray event to {execution_id}", execution_id)
            sim.note(f"client published a stray event to {execution_id}")
        while sim.everywhere.query(LEFT_SQL, (json.dumps(ids),)):
            await asyncio.sleep(0.5)


FINAL_SQL = (
    "SELECT 1 FROM executions WHERE id = ? AND status IN ('succeeded', 'failed', 'cancelled')"
)
LEFT_SQL = "SELECT 1 FROM messages WHERE group_id IN (SELECT value FROM json_each(?))"


def become(item: Any, kind: str, value: Any) -> None:
    """A planned execution (tests/sim/sim.py ``Planned``) of another kind, started once by
    the client, with no signals."""
    item.workflow, item.input, item.messages = kind, value, 0
    item.starts = [(item.at, value)]
    if kind == "limited":
        item.via = None  # as the plan does: a limited start goes through the client
