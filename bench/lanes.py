"""``python -m bench.lanes``: does a worker's claim stay flat when other apps' executions
wait beside its own? (issue "Queues and safe deploys")

On a fresh local 3-node rqlite cluster, ``--queued`` (10k) pending executions are started
(the start statement of ``stores.flows.start_params``, in requests of 1,000), spread evenly
over W distinct workflows of the default queue, for W = 1, 10, 100 (``--workflows``). At
each W a probe times the worker's own claim request (the queue's claim and the store's
claim context, one ``/db/request?transaction``; each lease given back at once, so the
queue holds) ``--samples`` times, in three ways:

- ``every lane``: the claim without lanes (``claim``: what a worker did before lanes);
- ``serves 1``: a worker that registers one of the W workflows (``claim_served``);
- ``serves all W``: a worker that registers all of them.

Rounds alternate the three, so each figure is beside the others of the same minute. The
claim is one Raft entry, whose commit dominates its latency; ``--sqlite`` also times the
claim's SELECT alone in an in-memory SQLite with the schema (what each node's SQLite spends
on it), at ``--sqlite-queued`` (100k) queued groups.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import time
import uuid
from typing import Any

from raftflow.engine.workflow.events import RUN
from raftflow.engine.workflow.queues import DEFAULT_QUEUE, UNROUTED, lane
from raftflow.stores.claim import claim_context
from raftflow.stores.flows import QUERIES as STORE
from raftflow.stores.rows import start_params
from raftflow.transports.db.flow import Request, Statement, run_flow
from raftflow.transports.db.schema import MIGRATIONS
from raftflow.transports.lanes import lanes_param
from raftflow.transports.payload import to_json
from raftflow.transports.queue import QUERIES as QUEUE
from raftflow.transports.rqlite.local import LocalCluster

from bench.cluster import BenchCluster
from bench.latency import summary_ms
from raftflow import Engine

#: Give back every message a probe claim leased: the bench's own reset.
RELEASE = "UPDATE messages SET locked_by = NULL, lock_expiry = 0 WHERE locked_by = ?"
CLEAR = ("DELETE FROM messages", "DELETE FROM executions")


def fill(cluster: BenchCluster, queued: int, workflows: int) -> None:
    event = to_json(RUN, what="event")
    now = time.time()
    statements = []
    for i in range(queued):
        name = f"wf{i % workflows}"
        params = start_params(
            f"lanes-{workflows}-{i:07d}",
            name,
            "1",
            0,
            event,
            now,
            uuid.uuid4().hex,
            lane=lane(DEFAULT_QUEUE, name),
        )
        statement = STORE("start", params)
        statements.append([statement.sql, statement.params])
    cluster.bulk(statements)


def probe(engine: Engine, lanes: str | None, limit: int) -> float:
    conn, flows = engine.store.database.connection, engine.transport.flows
    now = run_flow(conn, flows.clock.now())
    token = f"bench-lanes:{uuid.uuid4().hex}"
    statements = flows.claim_statements(token, now, now + 30.0, limit, 0, lanes)
    request = Request(statements + claim_context(token, now))
    started = time.perf_counter()
    response = conn.send(request).raise_for_errors()
    took = time.perf_counter() - started
    if len(response.result_of("queue.claimed").dicts()) != limit:
        raise RuntimeError("the probe claimed less than it asked for")
    conn.send(Request((Statement("bench.release", RELEASE, (token,)),)))
    return took


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    cases = []
    with LocalCluster(3) as local:
        cluster = BenchCluster(local)
        engine = Engine.from_url(local.urls)
        try:
            for workflows in args.workflows:
                cluster.execute([[sql] for sql in CLEAR])
                fill(cluster, args.queued, workflows)
                names = [lane(DEFAULT_QUEUE, f"wf{i}") for i in range(workflows)]
                kinds = {
                    "every lane": None,
                    "serves 1": lanes_param([UNROUTED, names[0]]),
                    f"serves all {workflows}": lanes_param([UNROUTED, *names]),
                }
                timings: dict[str, list[float]] = {kind: [] for kind in kinds}
                for _ in range(args.samples):
                    for kind, lanes in kinds.items():
                        timings[kind].append(probe(engine, lanes, args.limit))
                row = {"workflows": workflows, "queued": args.queued}
                row.update({kind: summary_ms(values) for kind, values in timings.items()})
                cases.append(row)
                print(render_row(row), flush=True)
        finally:
            engine.close()
            cluster.close()
    return cases


def render_row(row: dict[str, Any]) -> str:
    cells = [f"{kind} p50 {v['p50_ms']:.2f} ms" for kind, v in row.items() if isinstance(v, dict)]
    return f"{row['workflows']:>4} workflows waiting, {row['queued']:,} queued: " + ", ".join(cells)


def sqlite_cost(queued: int, workflows: int, samples: int) -> dict[str, Any]:
    """Microseconds per claim SELECT in SQLite (in memory, the migrated schema): the
    unfiltered claim's, and a served one's for 1 and for all of ``workflows`` lanes."""
    db = sqlite3.connect(":memory:")
    for migration in MIGRATIONS:
        for statement in migration.statements:
            db.execute(statement.sql)
    names = [lane(DEFAULT_QUEUE, f"wf{i}", "v1") for i in range(workflows)]
    db.executemany(
        "INSERT INTO messages (group_id, event, priority, published_at, lane) "
        "VALUES (?, '{}', 0, ?, ?)",
        ((f"g{i}", float(i), names[i % workflows]) for i in range(queued)),
    )
    heads = {
        name: re.search(r"WHERE seq IN \((.*)\)\s*$", QUEUE.queries[name], re.S)
        for name in ("claim", "claim_served")
    }
    row: dict[str, Any] = {"workflows": workflows, "queued": queued}
    for kind, name, lanes in (
        ("every lane", "claim", None),
        ("serves 1", "claim_served", lanes_param([UNROUTED, names[0]])),
        (f"serves all {workflows}", "claim_served", lanes_param([UNROUTED, *names])),
    ):
        found = heads[name]
        assert found is not None
        sql = found.group(1)
        params = {"now": float(queued), "limit": 1, "min_priority": 0, "lanes": lanes}
        started = time.process_time()
        for _ in range(samples):
            db.execute(sql, params).fetchall()
        row[kind] = round((time.process_time() - started) / samples * 1e6, 1)
    db.close()
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.lanes", description=__doc__)
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--workflows", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--limit", type=int, default=1, help="leases per claim")
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--sqlite", action="store_true", help="also the claim's SQLite cost")
    parser.add_argument("--sqlite-queued", type=int, default=100_000)
    parser.add_argument("--no-cluster", action="store_true", help="only --sqlite")
    args = parser.parse_args(argv)
    cases: list[dict[str, Any]] = [] if args.no_cluster else measure(args)
    if args.sqlite or args.no_cluster:
        for workflows in args.workflows:
            row = sqlite_cost(args.sqlite_queued, workflows, 200)
            cases.append({"sqlite_us": row})
            kinds = [k for k in row if k not in ("workflows", "queued")]
            cells = ", ".join(f"{k} {row[k]} us" for k in kinds)
            head = f"{workflows:>4} workflows, {row['queued']:,} queued"
            print(f"{head}, the claim's SELECT in SQLite: {cells}", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(cases, out, indent=2)


if __name__ == "__main__":
    main()
