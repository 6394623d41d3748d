"""Sharded seeds: a deployment of 2 or 3 simulated clusters, each with faults of its own.

In a share of the seeds (drawn from an RNG of its own, so the others' plans are as they
were) every process -- each worker, the client -- reaches several :class:`~tests.sim.
cluster.SimCluster`\\ s, and each worker's :class:`~raftflow.Engine` holds the engine's own
:class:`~raftflow.engine.shards.deployment.Shards` over them (a transport and a store per
cluster, routed by the catalog): each worker runs on every cluster, the client sends each
request to the cluster of its execution's id. The clusters share the processes' fates (a
killed worker is dead on all), each has its own network faults, elections, stale reads and
leader clock. The plan then has:

- ``faraway`` executions (tests/sim/workload_shards.py): a child with an explicit id on
  another cluster (the outbox and the relay bring its outcome back), some cancelled (the
  relay cancels the child there), some sending first to a listener on another cluster;
- the limited executions' ids drawn to route to their limit key's cluster (as the engine's
  start does: a limit is counted on one cluster);
- in half of them, the first worker about to delete a notice it relayed (applied on the
  target's cluster) is killed (``kill -9``) right then, and a replacement starts: the
  notice is relayed again, and must change nothing the second time.

What must hold besides every check of one cluster (each cluster checks its own leases and
limits after every write; the final checks read every cluster): every row of an execution
lives on the cluster its id routes to; every outbox is empty at the end (every notice
delivered: the run waits for it as it waits for the executions); a parent whose child is
elsewhere finished with the child's outcome, and a cancelled one left its child final.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raftflow.engine import Engine
from raftflow.engine.shards.deployment import Shard, Shards
from raftflow.engine.shards.partitions import key_route, partition_of
from raftflow.engine.workflow.schedule import SCHEDULE_PREFIX
from raftflow.stores import outbox
from raftflow.stores.catalog import Catalog
from raftflow.stores.store import SqlStore
from raftflow.transports.db.flow import Request
from raftflow.transports.transport import SqlTransport

from tests.sim import workload
from tests.sim.cluster import Faults, SimCluster
from tests.sim.plan import Plan, Planned
from tests.sim.pressure import become
from tests.sim.workload_shards import peer_message

if TYPE_CHECKING:
    from tests.sim.sim import Simulation

#: The share of seeds that run a sharded deployment.
SHARE = 0.3
PARTITIONS = 64
NAMES = ("shard-1", "shard-2", "shard-3")
#: Kinds a sharded seed may turn into ``faraway`` (``forked`` always is: a fork is made on
#: its source's cluster, under an id the client does not draw to route there).
CHANGEABLE = ("chain", "retried", "napper", "parent", "throttled", "forked")
#: The relay's delete of a notice it delivered (by catalogue name: a name gone fails here).
DELIVERED = outbox.SQL("delivered", {"seq": 0}).name
#: Each table's column that holds an execution's id (its rows live on that id's cluster).
OWNED = (
    ("executions", "id"),
    ("steps", "execution_id"),
    ("messages", "group_id"),
    ("groups", "group_id"),
    ("signals", "execution_id"),
    ("events", "execution_id"),
    ("streams", "execution_id"),
    ("remote_children", "parent_id"),
    ("sim_accounts", "id"),
    ("sim_ledger", "execution_id"),
)


@dataclass
class Sharding:
    """A seed's deployment: its catalog, the faults of its clusters after the first, and
    the executions whose news crosses clusters."""

    catalog: Catalog
    faults: list[Faults]
    #: Each ``faraway`` execution's child (on another cluster), by the parent's id.
    children: dict[str, str] = field(default_factory=dict)
    #: Each listener a ``faraway`` sends to, and its message.
    inboxes: dict[str, str] = field(default_factory=dict)
    #: Whether a relaying worker is killed between applying a notice and deleting it
    #: (until it happens once).
    relay_kill: bool = False

    @property
    def clusters(self) -> int:
        return len(set(self.catalog.assignment))

    def index_of(self, execution_id: str) -> int:
        """The index of the cluster ``execution_id`` routes to (an archived run's id,
        ``<id>#<run>``, is its execution's)."""
        part = partition_of(execution_id.split("#")[0], self.catalog.partitions)
        return NAMES.index(self.catalog.assignment[part])

    def describe(self) -> str:
        levels = ", ".join(
            f"{f.refused / 0.02:g}x stale {f.stale:g} clock jumps {f.clock_jump:g}s"
            for f in self.faults
        )
        return (
            f"sharded: {self.clusters} clusters (faults of the others: {levels}); across: "
            f"children {sorted(self.children.items())}, sends to {sorted(self.inboxes)}; "
            f"a relaying worker killed: {self.relay_kill}"
        )

    # -- the plan ---------------------------------------------------------------------------

    def shape(self, rng: random.Random, plan: Plan) -> None:
        for item in plan.executions:
            if item.workflow == "limited":
                self._place_limited(item)
        candidates = [item for item in plan.executions if item.workflow in CHANGEABLE]
        chosen = [i for i in candidates if i.workflow == "forked" or rng.random() < 0.25]
        if not chosen:
            if candidates:
                chosen = [rng.choice(candidates)]
            else:
                at = rng.uniform(0.0, max(item.at for item in plan.executions))
                extra = Planned(f"e{len(plan.executions)}", "chain", {}, at)
                plan.executions.append(extra)
                chosen = [extra]
        for item in chosen:
            child = self._elsewhere(item.id, "c")
            self.children[item.id] = child
            spec: dict[str, Any] = {"steps": rng.randint(1, 3), "child": child, "peer": None}
            cancel = rng.random() < 0.3
            if not cancel and rng.random() < 0.5:
                peer = self._elsewhere(item.id, "in")
                spec["peer"] = peer
                self.inboxes[peer] = peer_message(peer)
                inbox = Planned(peer, "listener", {"messages": 1}, item.at)
                inbox.starts = [(item.at, inbox.input)]  # started first: planned before
                plan.executions.insert(plan.executions.index(item), inbox)
            become(item, "faraway", spec)
            item.cancel_at = item.at + rng.uniform(0.0, 4.0) if cancel else None

    def _elsewhere(self, parent: str, tag: str) -> str:
        """An id of its own that routes to another cluster than ``parent``."""
        home = self.index_of(parent)
        return next(
            f"{parent}-{tag}{k}" for k in range(1000) if self.index_of(f"{parent}-{tag}{k}") != home
        )

    def _place_limited(self, item: Planned) -> None:
        """Its id routes to its limit key's cluster (as the engine draws a limited id)."""
        definition = workload.engine.registry.workflow(item.workflow)
        limit = workload.engine.registry.limit(definition, definition.encode_input(item.input))
        assert limit is not None
        item.id = f"{key_route(limit[0])}/{item.id}"

    # -- the run ----------------------------------------------------------------------------

    def clusters_of(self, sim: Simulation, first: SimCluster) -> list[SimCluster]:
        """``first`` and the other clusters, sharing the processes' fates with it."""
        clusters = [first]
        for index, faults in enumerate(self.faults, start=1):
            name = NAMES[index]
            cluster = SimCluster(
                sim.loop,
                first_tables(),
                random.Random(f"{name} of {sim.seed}"),
                faults,
                _prefixed(sim.note, name),
                first.rewrite,
                sim.violation,
                index=index,
            )
            cluster.processes, cluster.dead = first.processes, first.dead
            cluster.counters, cluster.clock_answers = first.counters, first.clock_answers
            clusters.append(cluster)
        for cluster in clusters:
            cluster.stall = self._killing_relays(sim, first.stall)
        return clusters

    def _killing_relays(
        self, sim: Simulation, stall: Callable[[str, Request], float] | None
    ) -> Callable[[str, Request], float]:
        """The clusters' stall hook (tests/sim/pressure.py), which first kills a worker about
        to delete a notice it relayed, once, in the seeds that do."""

        def stalled(who: str, request: Request) -> float:
            if self.relay_kill and any(s.name == DELIVERED for s in request.statements):
                self.relay_kill = False
                sim.cluster.process(who).died_at = sim.loop.time()
                sim.note(f"{who} killed (kill -9) between relaying a notice and deleting it")
                sim._start_worker(sim.plan.workers + 2)  # (the kill's takes +0, the drain's +1)
                return 0.001  # stopped before it sends: dead, it never does
            return 0.0 if stall is None else stall(who, request)

        return stalled

    def engine(self, sim: Simulation, who: str, base: Engine) -> Engine:
        """``base`` (a worker process's engine, on the first cluster) on every cluster."""
        (first,) = base.shards
        shards = [Shard(NAMES[0], first.transport, first.store)]
        for index in range(1, self.clusters):
            database = sim.database(who, index)
            transport, store = SqlTransport(database), SqlStore(database)
            store.share(transport)
            shards.append(Shard(NAMES[index], transport, store))
        base._shards = Shards(shards, self.catalog)
        return base


def draw(seed: int, plan: Plan) -> Sharding | None:
    """The seed's deployment, if it is a sharded seed (``plan`` shaped for it)."""
    rng = random.Random(f"shards {seed}")
    if rng.random() >= SHARE:
        return None
    count = rng.choice((2, 2, 3))
    faults = [Faults.draw(rng) for _ in range(count - 1)]
    for one in faults:  # as the plan draws the first cluster's: its leader's clock may jump
        if rng.random() < 0.2:
            one.clock_jump = rng.choice((1.0, 5.0))
    sharding = Sharding(Catalog.spread(PARTITIONS, NAMES[:count]), faults)
    sharding.shape(rng, plan)
    sharding.relay_kill = rng.random() < 0.5
    return sharding


def first_tables() -> Any:
    from raftflow.engine.workflow.transaction import create_tables_request

    return create_tables_request(workload.metadata)


def _prefixed(note: Callable[[str], None], name: str) -> Callable[[str], None]:
    return lambda line: note(f"{name}: {line}")


class Everywhere:
    """The true state of every cluster, for the checks: a query's rows from each."""

    def __init__(self, clusters: list[SimCluster]) -> None:
        self.clusters = clusters

    def query(self, sql: str, params: Any = ()) -> list[dict[str, Any]]:
        return [row for cluster in self.clusters for row in cluster.query(sql, params)]

    def process(self, name: str) -> Any:
        return self.clusters[0].process(name)

    def outboxes_empty(self) -> bool:
        return not self.query("SELECT 1 FROM outbox LIMIT 1")


# -- the checks -------------------------------------------------------------------------------


def check(sim: Simulation, sharding: Sharding) -> list[str]:
    """What a sharded run must show besides every check of one cluster."""
    problems: list[str] = []
    for cluster in sim.clusters:
        name = NAMES[cluster.index]
        for table, column in OWNED:
            for row in cluster.query(f'SELECT DISTINCT "{column}" AS id FROM "{table}"'):
                owner = row["id"]
                if owner.startswith("raftflow:") and not owner.startswith(SCHEDULE_PREFIX):
                    continue  # the engine's own groups (a schedule's is routed by its name)
                there = sharding.index_of(owner)
                if there != cluster.index:
                    problems.append(
                        f"{table} row of {owner} on {name}; its id routes to {NAMES[there]}"
                    )
        for row in cluster.query("SELECT DISTINCT key FROM rate_slots"):
            there = sharding.index_of(key_route(row["key"]))
            if there != cluster.index:
                problems.append(f"rate slots of {row['key']} on {name}, not {NAMES[there]}")
        left = cluster.query("SELECT seq, target, kind, source FROM outbox")
        if left:
            problems.append(f"outbox of {name} not delivered: {left[:3]}")
    problems += _check_children(sim, sharding)
    return problems


def _check_children(sim: Simulation, sharding: Sharding) -> list[str]:
    """A ``faraway`` parent finished with its child's outcome (its note on the parent's
    cluster too); a cancelled one left its child final."""
    problems = []
    for parent_id, child_id in sharding.children.items():
        parent = _row(sim, sharding, parent_id)
        child = _row(sim, sharding, child_id)
        if parent is None or parent["status"] not in ("succeeded", "cancelled"):
            continue  # reported by the checks of every execution
        if child is None:
            if parent["status"] == "succeeded":
                problems.append(f"{parent_id}: succeeded, its child {child_id} never started")
            continue
        if child["parent_id"] != parent_id:
            problems.append(f"{child_id}: parent {child['parent_id']!r}, not {parent_id!r}")
        if child["status"] not in ("succeeded", "failed", "cancelled"):
            problems.append(f"{child_id}: child elsewhere left {child['status']} by its parent")
        home = sim.clusters[sharding.index_of(parent_id)]
        notes = home.query(
            "SELECT status, output FROM remote_children WHERE parent_id = ? AND id = ?",
            (parent_id, child_id),
        )
        if parent["status"] == "succeeded":
            got = json.loads(parent["output"])[1]
            if child["status"] != "succeeded" or got != json.loads(child["output"]):
                problems.append(
                    f"{parent_id}: finished with {got!r} from its child {child_id} elsewhere, "
                    f"which {child['status']} with {child['output']}"
                )
            if [(n["status"], n["output"]) for n in notes] != [("succeeded", child["output"])]:
                problems.append(f"{parent_id}: its note of {child_id} is {notes}")
    return problems


def _row(sim: Simulation, sharding: Sharding, execution_id: str) -> dict[str, Any] | None:
    rows = sim.clusters[sharding.index_of(execution_id)].query(
        "SELECT * FROM executions WHERE id = ?", (execution_id,)
    )
    return rows[0] if rows else None
