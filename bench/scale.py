"""``--mode scale``: does the claim slow down as the queue grows, and does a worker's
memory stay flat over many steps? (issue "Performance", item 4)

1. Claim latency with 10, 1k, 10k and 100k executions queued (``--queued``). The queue is
   filled by inserting executions (their record and first event, exactly what
   ``engine.start`` writes) in multi-statement requests of 1,000. At each size the
   worker's own claim request (the queue's claim + the store's claim context, one
   ``/db/request?transaction``) is timed ``--claim-samples`` times, each claimed lease
   being released at once so the size holds; so is the idle poll (a ``weak`` read).
   The claim's ``EXPLAIN QUERY PLAN`` at the largest size is kept in the JSON.
2. The same for the spec's naive claim (its ``UPDATE`` alone, and the three requests of
   a naive claim), on its own ``naive_`` tables.
3. RSS over ``--rss-executions`` x ``--rss-steps`` steps (100k by default) with W worker
   processes, sampled every second; the table shows RSS and throughput per 10% of steps.

On the 2-core machine of docs/performance.md the whole mode takes about 5 minutes.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from bench import latency, naive
from bench.children import kill_all, stop_all
from bench.phases import (
    Context,
    Measured,
    _sampler,
    start_executions,
    start_workers,
    step_rows,
    wait_raftflow,
)
from bench.summary import raftflow_summary
from raftflow import Engine

RAFTFLOW_TABLES = ("messages", "groups", "message_keys", "steps", "executions")


def sizes_of(queued: int) -> list[int]:
    sizes = [10, queued // 100, queued // 10, queued]
    return sorted({n for n in sizes if n >= 10})


def _fill_raftflow(ctx: Context, have: int, want: int) -> None:
    from raftflow.engine.workflow.events import RUN
    from raftflow.stores.flows import QUERIES as STORE
    from raftflow.stores.flows import start_params
    from raftflow.transports.payload import to_json

    event = to_json(RUN, what="event")
    now = time.time()
    statements = []
    for i in range(have, want):
        statement = STORE(
            "start",
            start_params(
                f"scale-{i:07d}",
                "chain",
                '{"steps": 1, "sleep": 0.0}',
                0,
                event,
                now,
                uuid.uuid4().hex,
            ),
        )
        statements.append([statement.sql, statement.params])
    for start in range(0, len(statements), 1000):
        ctx.cluster.execute(statements[start : start + 1000])
        ctx.progress.update(f"queued {have + start + 1000:,}/{want:,}")


#: Give back every message a probe claim leased (of many groups): the bench's own reset.
RELEASE = "UPDATE messages SET locked_by = NULL, lock_expiry = 0 WHERE locked_by = ?"


def raftflow_claims(ctx: Context) -> dict[str, Any]:
    from raftflow.engine.workflow.queues import UNROUTED
    from raftflow.stores.claim import claim_context
    from raftflow.transports.db.flow import Request, Statement, run_flow
    from raftflow.transports.lanes import lanes_param
    from raftflow.transports.queue import QUERIES as QUEUE

    s = ctx.settings
    served = lanes_param([UNROUTED])  # the lane of the executions filled in (they name none)
    engine = Engine.from_url(ctx.cluster.leader_url)
    conn, flows = engine.store.database.connection, engine.transport.flows
    cases: list[dict[str, Any]] = []
    have = 0
    plan: list[str] = []
    try:
        for size in sizes_of(s.queued):
            ctx.progress.start(f"raftflow claims, {size:,} queued")
            _fill_raftflow(ctx, have, size)
            have = size
            timings: dict[str, list[float]] = {}
            for limit in (1, s.concurrency):
                key = f"raftflow claim (limit {limit})"
                for n in range(s.claim_samples):
                    now = run_flow(conn, flows.clock.now())
                    token = f"bench-scale:{uuid.uuid4().hex}"
                    request = Request(  # a worker's claim: of the lanes it serves
                        flows.claim_statements(token, now, now + 30.0, limit, 0, served)
                        + claim_context(token, now)
                    )
                    started = time.perf_counter()
                    response = conn.send(request).raise_for_errors()
                    timings.setdefault(key, []).append(time.perf_counter() - started)
                    claimed = response.result_of("queue.claimed").dicts()
                    if len(claimed) != min(limit, size):
                        raise RuntimeError(
                            f"claimed {len(claimed)} of {size} queued (limit {limit})"
                        )
                    conn.send(Request((Statement("bench.release", RELEASE, (token,)),)))
                    if n % 20 == 0:
                        ctx.progress.update(f"{key}: {n}/{s.claim_samples}")
            for _ in range(s.claim_samples):
                started = time.perf_counter()
                run_flow(conn, flows.claimable(0, [UNROUTED]))
                timings.setdefault("raftflow idle poll (weak read)", []).append(
                    time.perf_counter() - started
                )
            cases.append({"queued": size, **{k: latency.summary_ms(v) for k, v in timings.items()}})
            first = cases[-1]["raftflow claim (limit 1)"]
            ctx.progress.done(f"claim p50 {first['p50_ms']} ms, p99 {first['p99_ms']} ms")
        # rqlite refuses EXPLAIN of an UPDATE on /db/query: explain the SELECT that picks
        # the claimed rows (the UPDATE's `seq IN (...)`), at the largest size.
        now = run_flow(conn, flows.clock.now())
        params = {"now": now, "limit": 1, "min_priority": 0}
        params["lanes"] = served
        found = re.search(r"WHERE seq IN \((.*)\)\s*$", QUEUE.queries["claim_served"], re.S)
        if found:
            sql = "EXPLAIN QUERY PLAN " + found.group(1)
            rows = conn.send(Request((Statement("plan", sql, params),), level="weak"))
            plan = [str(r["detail"]) for r in rows.raise_for_errors()[0].dicts()]
    finally:
        engine.close()
    return {"cases": cases, "claim_plan": plan}


def naive_claims(ctx: Context) -> dict[str, Any]:
    s = ctx.settings
    ctx.progress.start("naive claims, 10 to 100k queued")
    ctx.cluster.execute([[sql] for sql in naive.SCHEMA])
    cases: list[dict[str, Any]] = []
    have = 0
    for size in sizes_of(s.queued):
        statements = []
        for i in range(have, size):
            statements += naive.publish_statements(f"nscale-{i:07d}", 0, 1, 0.0)
        for start in range(0, len(statements), 2000):
            ctx.cluster.execute(statements[start : start + 2000])
            ctx.progress.update(f"queued {have + start // 2 + 1000:,}/{size:,}")
        have = size
        update: list[float] = []
        whole: list[float] = []
        for _ in range(s.naive_claim_samples):
            token = f"bench-scale:{uuid.uuid4().hex}"
            now = time.time()
            started = time.perf_counter()
            result = ctx.cluster.execute([[naive.CLAIM, token, now + 30, now, now, 0]])[0]
            update.append(time.perf_counter() - started)
            if result.get("rows_affected") != 1:
                raise RuntimeError(f"naive claim leased nothing with {size} queued")
            rows = ctx.cluster.query(naive.READ_BACK, token, level="strong")
            seq, group_id = rows[0][0], rows[0][1]
            ctx.cluster.execute([[naive.TOUCH_GROUP, now, group_id]])
            whole.append(time.perf_counter() - started)
            ctx.cluster.execute(
                [["UPDATE naive_messages SET locked_by = NULL, lock_expiry = 0 WHERE seq = ?", seq]]
            )
        cases.append(
            {
                "queued": size,
                "naive claim UPDATE": latency.summary_ms(update),
                "naive claim (3 requests)": latency.summary_ms(whole),
            }
        )
        ctx.progress.update(
            f"{size:,} queued: UPDATE p50 {cases[-1]['naive claim UPDATE']['p50_ms']} ms"
        )
    now = time.time()
    subquery = naive.CLAIM.split("WHERE seq = (", 1)[1].rsplit(")", 1)[0]
    plan = [str(r[3]) for r in ctx.cluster.query("EXPLAIN QUERY PLAN " + subquery, now, now, 0)]
    ctx.cluster.execute([["DROP TABLE naive_messages"], ["DROP TABLE naive_groups"]])
    last = cases[-1]["naive claim UPDATE"]
    ctx.progress.done(f"UPDATE p50 {last['p50_ms']} ms at {cases[-1]['queued']:,} queued")
    return {"cases": cases, "claim_plan": plan}


def rss_run(ctx: Context) -> dict[str, Any]:
    from bench import app

    s = ctx.settings
    total = s.rss_executions * s.rss_steps
    ctx.cluster.execute([[f"DELETE FROM {table}"] for table in RAFTFLOW_TABLES])
    ctx.progress.start(f"RSS over {total:,} steps, {s.workers}x{s.concurrency}")
    engine = app.engine
    engine.connect(ctx.cluster.entry_url(0))
    # No latency samples in the workers: their lists would grow with the run and be
    # counted as the worker's memory.
    children = start_workers(ctx, s.workers, samples=False)
    series: list[tuple[float, int]] = []
    try:
        with _sampler(ctx, children, interval=1.0) as sampler:
            measured = Measured(ctx, children, sampler)
            measured.begin()
            series.append((time.time(), 0))

            def poll() -> None:  # steps done so far, while the executions are being started
                done = ctx.cluster.scalar("SELECT COUNT(*) FROM steps")
                series.append((time.time(), int(done)))

            _, workflow = start_executions(
                ctx, engine, s.rss_executions, s.rss_steps, "rss", on_progress=poll
            )
            wait_raftflow(
                ctx,
                children,
                s.rss_executions,
                total,
                on_poll=lambda t, n: series.append((t, n)),
                interval=1.0,
            )
            win = measured.end()
            rss_series = sampler.rss_series("workers")
            rss = sampler.rss_summary("workers", win.t[0], win.t[1])
        results = stop_all(children)
    finally:
        kill_all(children)
        engine.close()
    rows = step_rows(ctx, workflow)
    stamps = ctx.cluster.query(
        "SELECT MIN(created_at), MAX(completed_at), COUNT(*) FROM executions WHERE workflow = ?",
        workflow,
    )[0]
    summary = raftflow_summary(
        ctx, win, results, rows, (int(stamps[2]), float(stamps[1]) - float(stamps[0]))
    )
    points = _rss_points(series, rss_series, rows, total)
    half = next(p for p in points if p["steps"] >= total // 2)
    ctx.progress.done(
        f"{total:,} steps, RSS {points[0]['rss_mb']:.0f} -> {points[-1]['rss_mb']:.0f} MB"
    )
    return {
        "workers": s.workers,
        "concurrency": s.concurrency,
        "steps": len(rows),
        "seconds": round(win.seconds, 1),
        "steady_steps_per_s": summary["steady_steps_per_s"],
        "points": points,
        "growth_second_half_mb": round(points[-1]["rss_mb"] - half["rss_mb"], 1),
        "worker_rss": rss,
        "summary": summary,
    }


def _rss_points(
    progress: list[tuple[float, int]],
    rss: list[tuple[float, float]],
    rows: list[latency.StepRow],
    total: int,
) -> list[dict[str, Any]]:
    """RSS (summed over the workers) when 0%, 10%, ... 100% of the steps were done, and
    the throughput of each 10% segment (from the steps' recorded end times)."""
    ends = sorted(r[3] for r in rows)
    points = []
    previous_end: float | None = None
    for tenth in range(11):
        target = total * tenth // 10
        when = next((t for t, n in progress if n >= target), progress[-1][0] if progress else 0)
        sample = min(rss, key=lambda s: abs(s[0] - when)) if rss else (0.0, 0.0)
        point: dict[str, Any] = {"steps": target, "rss_mb": round(sample[1], 1)}
        if ends and tenth > 0:
            end = ends[min(len(ends) - 1, max(0, target - 1))]
            if previous_end is not None and end > previous_end:
                point["steps_per_s"] = round((total / 10) / (end - previous_end), 1)
            previous_end = end
        elif ends:
            previous_end = ends[0]
        points.append(point)
    return points


def run_scale(ctx: Context) -> dict[str, Any]:
    claims = raftflow_claims(ctx)
    naive_cases = naive_claims(ctx)
    sizes = [case["queued"] for case in claims["cases"]]
    merged = [{**rf, **nv} for rf, nv in zip(claims["cases"], naive_cases["cases"])]
    labels = [k for k in merged[0] if k != "queued"] if merged else []
    return {
        "claim_latency": {
            "sizes": sizes,
            "labels": labels,
            "cases": merged,
            "claim_plan": claims["claim_plan"],
            "naive_claim_plan": naive_cases["claim_plan"],
        },
        "rss": rss_run(ctx),
    }
