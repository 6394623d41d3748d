"""The naive baseline's phase: the spec's queue used as a workflow engine would use it
naively (bench/naive.py), over the same cluster and settings as the raftflow phase."""

from __future__ import annotations

import time
from typing import Any

from bench import latency, naive
from bench.children import Child, kill_all, stop_all
from bench.phases import Context, Measured, _check_alive, _sampler, _spawn
from bench.summary import accounting, worker_window


def run_naive(ctx: Context) -> dict[str, Any]:
    s = ctx.settings
    progress = ctx.progress
    progress.start(f"naive spec, {s.workers}x{s.concurrency}, {s.executions}x{s.steps}")
    ctx.cluster.execute([[sql] for sql in naive.SCHEMA])

    def make(i: int) -> Child:
        node = ctx.cluster.nodes[i % len(ctx.cluster.nodes)]
        args = ["--url", node.url, "--concurrency", str(s.concurrency)]
        return Child(
            f"naive-{i}", "bench.naive", [*args, "--worker-id", f"naive-{i}"], ctx.work_dir
        )

    children = _spawn(ctx, make, s.workers)
    try:
        with _sampler(ctx, children) as sampler:
            measured = Measured(ctx, children, sampler)
            measured.begin()
            started_at = time.time()
            for i in range(s.executions):
                ctx.cluster.execute(
                    naive.publish_statements(f"naive-{i}", 0, s.steps, s.step_sleep)
                )
            published = s.executions  # one request (one Raft entry) each
            deadline = time.monotonic() + s.phase_timeout
            while True:
                done = int(ctx.cluster.scalar("SELECT COUNT(*) FROM naive_checkpoints"))
                progress.update(f"{done:,}/{s.total_steps:,} steps")
                if done >= s.total_steps:
                    break
                _check_alive(children)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"naive: {done}/{s.total_steps} steps after the timeout")
                time.sleep(0.25)
            win = measured.end()
            rss = sampler.rss_summary("workers", win.t[0], win.t[1])
        results = stop_all(children)
    finally:
        kill_all(children)
    rows = [
        (r[0], int(r[1]), float(r[2]), float(r[3]))
        for r in ctx.cluster.query(
            "SELECT execution_id, idx, started_at, ended_at FROM naive_checkpoints"
        )
    ]
    counted = worker_window(results)
    steps = len(rows)
    worker_raft = int(sum(counted["raft"].values()))
    applied = win.raft_entries()
    last_end = max((r[3] for r in rows), default=started_at)
    summary = {
        "workers": s.workers,
        "concurrency": s.concurrency,
        "executions": s.executions,
        "steps": steps,
        **latency.throughput(rows),
        "executions_per_s": round(s.executions / (last_end - started_at), 1),
        "step_to_step": latency.summary_ms(latency.step_gaps(rows)["all"]),
        "claim_request": latency.summary_ms(counted["samples"].get("naive.claim", [])),
        "requests_by_kind": counted["requests"],
        **accounting(counted, win, steps, worker_raft, published, applied),
        "worker_rss": rss,
        "raft": [win.raft[0].as_json(), win.raft[1].as_json()],
    }
    progress.done(
        f"{steps:,} steps, {summary['steady_steps_per_s']:,.0f} steps/s, "
        f"{summary['raft_per_step']} Raft entries/step"
    )
    return summary
