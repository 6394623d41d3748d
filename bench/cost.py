"""``--mode cost``: what one request costs rqlite, in CPU, on the leader and on a follower.

One client sends each kind of request ``--claim-samples`` times, one after another, to
the leader; the CPU time of the leader and of the followers (psutil) is divided by the
number of requests (and of statements). It answers "where does a step's cost go": the
fixed cost of a Raft entry, the marginal cost of a statement in it, and the cost of
raftflow's own statements (the fenced commit with its triggers, the claim).

It also times a design raftflow does not use (yet): the N commits of a group commit as
*one* multi-row ``INSERT INTO execution_commits`` plus one outcome ``SELECT``, so that
each node prepares the trigger program once per request instead of once per commit.
(With the current ``RAISE(ABORT)`` fencing one lost lease would fail the whole
statement; a real design would fence with ``RAISE(IGNORE)`` and read the outcomes.)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import psutil  # type: ignore[import-untyped]

from bench.phases import Context
from raftflow import Engine


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def run_cost(ctx: Context) -> dict[str, Any]:
    from raftflow.engine.workflow.events import RUN
    from raftflow.stores.claim import claim_context
    from raftflow.stores.commit import Commit
    from raftflow.stores.flows import QUERIES as STORE
    from raftflow.stores.flows import start_params
    from raftflow.stores.records import Status
    from raftflow.transports.db.flow import Request, Statement, run_flow
    from raftflow.transports.payload import to_json

    n = ctx.settings.claim_samples
    leader = ctx.cluster.nodes[0]
    followers = ctx.cluster.nodes[1:]
    run_text = to_json(RUN, what="event")
    engine = Engine.from_url(leader.url)
    transport, store = engine.transport, engine.store
    conn, flows = store.database.connection, transport.flows
    rows: list[dict[str, Any]] = []

    def measure(label: str, send: Callable[[], object], statements: int, commits: int = 0) -> None:
        ctx.progress.start(f"cost: {label}")
        leader0 = _cpu(leader.pid or 0)
        follow0 = sum(_cpu(f.pid or 0) for f in followers)
        started = time.perf_counter()
        for i in range(n):
            send()
            if i % 50 == 0:
                ctx.progress.update(f"{i}/{n}")
        wall = time.perf_counter() - started
        leader_ms = (_cpu(leader.pid or 0) - leader0) / n * 1000
        follower_ms = (sum(_cpu(f.pid or 0) for f in followers) - follow0) / len(followers) / n
        cluster_ms = leader_ms + follower_ms * 1000 * len(followers)
        row: dict[str, Any] = {
            "request": label,
            "statements": statements,
            "wall_ms": round(wall / n * 1000, 3),
            "leader_cpu_ms": round(leader_ms, 3),
            "follower_cpu_ms": round(follower_ms * 1000, 3),
            "cluster_cpu_ms": round(cluster_ms, 3),
        }
        if commits:
            row["cluster_cpu_ms_per_commit"] = round(cluster_ms / commits, 3)
            row["commits_per_s_one_client"] = round(commits * n / wall, 1)
        rows.append(row)
        ctx.progress.done(
            f"{row['wall_ms']} ms, CPU leader {row['leader_cpu_ms']} ms + "
            f"{len(followers)} x follower {row['follower_cpu_ms']} ms"
        )

    def leased(count: int) -> tuple[str, dict[str, int], list[str]]:
        now = run_flow(conn, flows.clock.now())
        ids = [uuid.uuid4().hex for _ in range(count)]
        starts = tuple(
            STORE("start", start_params(e, "chain", "{}", 0, run_text, now, uuid.uuid4().hex))
            for e in ids
        )
        conn.send(Request(starts, transaction=True)).raise_for_errors()
        claimed = store.claim(transport, "bench-cost", 3600, count)
        token = claimed[0].lease.token
        return token, {c.lease.group_id: c.lease.seq for c in claimed}, ids

    try:
        conn.send(
            Request(
                (
                    Statement(
                        "raw.schema",
                        "CREATE TABLE IF NOT EXISTS bench_raw "
                        "(id INTEGER PRIMARY KEY, client TEXT NOT NULL, v INTEGER NOT NULL)",
                    ),
                )
            )
        ).raise_for_errors()
        for k in (1, 10):
            insert = Request(
                tuple(
                    Statement("raw", "INSERT INTO bench_raw (client, v) VALUES (?, ?)", ("c", i))
                    for i in range(k)
                ),
                transaction=False,
            )
            measure(f"raw INSERT x{k}", _sender(conn, insert), k)

        weak = Request((Statement("read", "SELECT 1"),), level="weak")
        measure("weak read SELECT 1", _sender(conn, weak), 1)
        strong = Request((Statement("read", "SELECT 1"),), level="strong")
        measure("strong read SELECT 1", _sender(conn, strong), 1)

        for batch in (1, 10, 30):
            token, seqs, ids = leased(batch)
            step = [0]

            def commit_all(
                token: str = token,
                seqs: dict[str, int] = seqs,
                ids: list[str] = ids,
                step: list[int] = step,
            ) -> None:
                now = run_flow(conn, flows.clock.now())
                commits = [
                    Commit(
                        execution_id=e,
                        lease_seq=seqs[e],
                        lease_token=token,
                        worker_id="bench-cost",
                        step_idx=step[0],
                        step_name="tick",
                        step_status="succeeded",
                        step_output="1",
                        step_started_at=now,
                        status=Status.RUNNING,
                        next_event=run_text,
                        next_token=token,
                    )
                    for e in ids
                ]
                outcomes = store.run(store.commits.commit(commits, 3600))
                for e, outcome in zip(ids, outcomes):
                    if not outcome.applied or outcome.next_seq is None:
                        raise RuntimeError(f"commit of {e} not applied: {outcome.error}")
                    seqs[e] = outcome.next_seq
                step[0] += 1

            measure(f"raftflow commit x{batch} (engine)", commit_all, 2, batch)

        now = run_flow(conn, flows.clock.now())
        empty = Request(
            flows.claim_statements("bench-cost:none", now, now + 30, 16, 0)
            + claim_context("bench-cost:none", now)
        )
        measure("claim request, nothing claimable", _sender(conn, empty), 6)
        poll = Request((_claimable_statement(now),), level="weak")
        measure("idle poll (weak read)", _sender(conn, poll), 1)
    finally:
        engine.close()
    from bench.sqlite_cost import claim_statement_costs, commit_cost

    ctx.progress.start("cost: SQLite alone, prepare vs run")
    sqlite_commit = commit_cost(300 if ctx.settings.smoke else 3000)
    ctx.progress.done(
        f"commit {sqlite_commit['commit_ms_cache_128']} ms cached, "
        f"{sqlite_commit['commit_ms_cache_0']} ms prepared each time"
    )
    ctx.progress.start("cost: SQLite alone, claim statements")
    sizes = [10, 1_000] if ctx.settings.smoke else [10, 1_000, 10_000, 100_000]
    claim = claim_statement_costs(sizes)
    ctx.progress.done(f"pending {sizes[-1]:,}: {claim['rows'][-1]}")
    return {
        "requests": rows,
        "samples": n,
        "sqlite_alone": {"commit": sqlite_commit, "claim_statements": claim},
    }


def _sender(conn: Any, request: Any) -> Callable[[], object]:
    return lambda: conn.send(request).raise_for_errors()


def _claimable_statement(now: float) -> Any:
    from raftflow.transports.queue import QUERIES as QUEUE

    return QUEUE("claimable", {"now": now, "limit": 1, "min_priority": 0})
