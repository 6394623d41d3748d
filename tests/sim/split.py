"""Split seeds: the queue on one simulated cluster, the state on another (stores/split.py).

In a share of the unsharded seeds (drawn from an RNG of its own, so the other seeds' plans
and traces stay as they were) every process -- each worker, the client -- holds a split
pair: its transport on the first cluster, its store on a second one, with faults of its
own (network, elections, stale reads, its leader's clock). The commit goes to the state's
cluster first, fenced by the lease's mirror; the ack and what the commit published go to
the queue's after, through the store's outbox and relay. The processes share their fates
on both (a killed worker is dead on each).

What a split pair refuses is left out of such a seed's plan: concurrency limits (the
``limited`` executions become ``chain`` ones) and the cron schedule. Every check of one
cluster holds as it is: the executions, records and signals are read on the state's
cluster, and the queue's cluster must hold none of them.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from raftflow.engine import Engine
from raftflow.stores.store import AsyncSqlStore, SqlStore
from raftflow.transports.transport import SqlTransport

from tests.sim import workload
from tests.sim.cluster import Faults, SimCluster
from tests.sim.plan import Plan
from tests.sim.pressure import become

if TYPE_CHECKING:
    from tests.sim.sim import Simulation

#: The share of (unsharded) seeds that run a split pair.
SHARE = 0.2
#: The cluster that holds the state (the queue's is the first, index 0).
STATE = 1


def draw(seed: int, plan: Plan) -> tuple[Plan, Faults] | None:
    """The seed's plan reshaped for a split pair and the state cluster's faults, if it is a
    split seed."""
    rng = random.Random(f"split {seed}")
    if rng.random() >= SHARE:
        return None
    for item in plan.executions:
        if item.workflow == "limited":
            become(item, "chain", {"steps": item.input["steps"]})
    faults = Faults.draw(rng)
    if rng.random() < 0.2:
        faults.clock_jump = rng.choice((1.0, 5.0))
    return replace(plan, cron=False), faults


def clusters_of(sim: Simulation, first: SimCluster, faults: Faults) -> list[SimCluster]:
    """The queue's cluster ``first`` and the state's, sharing the processes' fates."""
    from tests.sim.shards import first_tables

    state = SimCluster(
        sim.loop,
        first_tables(),
        random.Random(f"state of {sim.seed}"),
        faults,
        lambda line: sim.note(f"state: {line}"),
        first.rewrite,
        sim.violation,
        index=STATE,
    )
    state.processes, state.dead = first.processes, first.dead
    state.counters, state.clock_answers = first.counters, first.clock_answers
    state.stall, state.on_claim = first.stall, first.on_claim
    state.audit.tables = first.audit.tables
    return [first, state]


def engine(sim: Simulation, who: str) -> Engine:
    """Process ``who``'s engine: its transport on the queue's cluster, its store on the
    state's (each its own connection and cluster clock)."""
    engine = Engine(  # the simulated workload keeps its executions: no retention
        transport=SqlTransport(sim.database(who, 0)),
        store=SqlStore(sim.database(who, STATE)),
        retention=None,
    )
    engine.registry = workload.engine.registry
    engine.hooks = workload.engine.hooks
    return engine


def client_backends(sim: Simulation) -> list[AsyncSqlStore]:
    """The client's stores by cluster index: the state's is the split pair's."""
    store = SqlStore(sim.database("client", STATE))
    store.share(SqlTransport(sim.database("client", 0)))
    return [SqlStore(sim.database("client", 0)).to_async(), store.to_async()]


def describe(faults: Faults) -> str:
    return (
        f"split: the queue on the first cluster, the state on a second ({faults.refused / 0.02:g}x "
        f"stale {faults.stale:g} clock jumps {faults.clock_jump:g}s)"
    )


def leftovers(sim: Simulation) -> list[str]:
    """What must hold at the end of a split seed besides every check of one cluster: the
    queue's cluster holds no state (an execution's event stuck in the state's cluster leaves
    it unfinished: the check of one cluster calls it stuck)."""
    problems: list[str] = []
    queue = sim.clusters[0]
    for table in ("executions", "steps", "signals"):
        count = queue.query(f'SELECT COUNT(*) AS n FROM "{table}"')[0]["n"]
        if count:
            problems.append(f"split: {count} rows of {table} on the queue's cluster")
    return problems


def left_unsettled(sim: Simulation, sql: str) -> list[dict[str, Any]]:
    """The messages ``sql`` finds left at the end (group_id, locked_by), but for the events
    of finished executions that a split pair may leave: in the queue (a cancel of a
    pending execution, or a turn's end whose ack was lost, leaves its event there; a claim
    finds the execution finished and acks it), in the state's cluster a park (a wake-up of
    the duplicate a lost ack made, due later: relayed, then acked so) or a mirror (of a
    claim whose answer was lost after it applied: its worker gave the lease back, and no
    commit settles it; retention deletes it with the execution)."""
    queue, state = sim.clusters
    finished = {
        row["id"]
        for row in state.query(
            "SELECT id FROM executions WHERE status IN ('succeeded', 'failed', 'cancelled')"
        )
    }
    left = [r for r in queue.query(sql, (sim.end_time,)) if r["group_id"] not in finished]
    return left + [r for r in state.query(sql, (sim.end_time,)) if r["group_id"] not in finished]
