"""``python -m bench --shards 1,2,3``: what sharding buys and costs, measured.

For each N in turn: N single-node rqlite clusters, a new sharded deployment over them
(their URLs joined by ``;``; N = 1 is one cluster, unsharded), W worker processes given
that URL (each runs on every cluster, with C slots on each) and the same workload for
every N: E executions of K steps, started by this process with the ids ``run-0`` ..
``run-<E-1>``, so that the split over the clusters is the hash's and the same in every
run. As every phase (:mod:`bench.phases`), it is measured between two marks: per cluster,
the node's Raft applied index (``/status``), its rqlited's CPU time and the requests the
workers and this process sent it (counted by cluster: :mod:`bench.counting`); in total,
steps/s, Raft entries per step and the workers' CPU. Then the same workers, with nothing
to do, for ``shard_idle`` seconds: the idle cost per cluster. And what one more process's
connect (the catalog read) and one ``list()`` (scatter-gather) cost each cluster.

On a 2-core machine every node, every worker and this process share the CPU, so total
steps/s is bound by the CPU, not by a leader: what shows the scale-out is each cluster's
Raft entries and leader CPU falling as ~1/N. :mod:`bench.shard_model` projects N = 8..64
clusters on machines of their own from these figures.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import latency
from bench.children import Child, kill_all, mark_all, stop_all
from bench.cluster import BenchCluster
from bench.counting import Tally, window
from bench.phases import Context, _check_alive, start_workers, step_rows
from bench.progress import Progress
from bench.sampler import Sampler, cores
from bench.settings import Settings
from bench.summary import worker_window

#: The executions' ids: ``run-<i>``.
ID_PREFIX = "run-"
#: Seconds the workers are left idle before the idle window (their polls back off).
IDLE_SETTLE = 1.0
#: The ids of the single writes: ``single-<i>``.
SINGLE_PREFIX = "single-"


@contextmanager
def local_clusters(n: int, work_dir: Path) -> Iterator[list[BenchCluster]]:
    """``n`` single-node rqlite clusters, stopped on exit."""
    from raftflow.transports.rqlite.local import LocalCluster

    with ExitStack() as stack:
        clusters = []
        for i in range(n):
            local = stack.enter_context(LocalCluster(1, base_dir=work_dir / f"n{n}" / f"c{i}"))
            cluster = BenchCluster(local)
            stack.callback(cluster.close)
            clusters.append(cluster)
        yield clusters


@dataclass(frozen=True)
class Mark:
    """What the parent saw at one mark: per cluster its Raft applied index; CPU seconds
    per sampler group (each cluster's node, the workers, this process); this process's
    requests."""

    applied: dict[str, int]
    cpu: dict[str, float]
    tally: dict[str, Any]
    t: float


@dataclass
class Deployment:
    """The clusters of one N, by their names in the deployment (URL order)."""

    clusters: dict[str, BenchCluster]
    identities: dict[str, str]  # name -> the connection's identity the tallies count by
    tally: Tally

    def mark(self, children: Sequence[Child], number: int, sampler: Sampler) -> Mark:
        applied = {name: c.raft_mark().applied_index for name, c in self.clusters.items()}
        mark_all(children, number)
        return Mark(applied, sampler.cpu(), self.tally.snapshot(), time.time())

    def settle(self) -> None:
        for cluster in self.clusters.values():
            cluster.settle()

    def per_cluster(self, m0: Mark, m1: Mark, counted: dict[str, Any]) -> list[dict[str, Any]]:
        """Each cluster's Raft entries (its node's index; and counted: the workers', this
        process's), requests and leader CPU seconds between two marks."""
        client = window(m0.tally, m1.tally, "clusters")
        client_raft = window(m0.tally, m1.tally, "clusters_raft")
        rows = []
        for name in self.clusters:
            identity = self.identities[name]
            rows.append(
                {
                    "cluster": name,
                    "raft_entries": m1.applied[name] - m0.applied[name],
                    "raft_entries_workers": int(counted["clusters_raft"].get(identity, 0)),
                    "raft_entries_client": int(client_raft.get(identity, 0)),
                    "requests_workers": int(counted["clusters"].get(identity, 0)),
                    "requests_client": int(client.get(identity, 0)),
                    "leader_cpu_s": round(m1.cpu[name] - m0.cpu[name], 3),
                }
            )
        return rows

    def request_cost(self, action: Callable[[], object]) -> dict[str, Any]:
        """What ``action`` (run in this process) took, and the requests and Raft entries
        it cost each cluster."""
        before = self.tally.snapshot()
        started = time.perf_counter()
        action()
        seconds = time.perf_counter() - started
        after = self.tally.snapshot()
        requests, raft = window(before, after, "clusters"), window(before, after, "clusters_raft")
        return {
            "seconds": round(seconds, 4),
            "per_cluster": {
                name: {
                    "requests": int(requests.get(identity, 0)),
                    "raft_entries": int(raft.get(identity, 0)),
                }
                for name, identity in self.identities.items()
            },
        }


def run_shards(
    settings: Settings, work_dir: Path, progress: Progress, tally: Tally
) -> dict[str, Any]:
    runs = [run_one(settings, work_dir, progress, tally, n) for n in settings.shards]
    return {
        "shards": {
            "workload": {
                "executions": settings.executions,
                "steps": settings.steps,
                "total_steps": settings.total_steps,
                "workers": settings.workers,
                "concurrency_per_cluster": settings.concurrency,
                "idle_seconds": settings.shard_idle,
                "ids": f"{ID_PREFIX}<i>",
            },
            "cpu_bound_note": CPU_NOTE,
            "runs": runs,
        }
    }


CPU_NOTE = (
    "every node, worker and the benchmark share this machine's cores: total steps/s is "
    "bound by the CPU, not by a leader; the scale-out shows in each cluster's Raft entries "
    "and leader CPU falling as ~1/N"
)


def run_one(
    settings: Settings, work_dir: Path, progress: Progress, tally: Tally, n: int
) -> dict[str, Any]:
    """The workload, the idle window and the per-process costs on ``n`` clusters."""
    from bench import app
    from raftflow import Engine

    progress.start(f"shards: start {n} single-node cluster{'s' if n > 1 else ''}")
    with local_clusters(n, work_dir) as clusters:
        url = ";".join(c.leader_url for c in clusters)
        engine = app.engine
        engine.connect(url)  # the first process: it names the clusters, writes the catalog
        try:
            shards = list(engine.shards)
            names = [shard.name or "unsharded" for shard in shards]
            deployment = Deployment(
                dict(zip(names, clusters)),
                {name: shard.identity for name, shard in zip(names, shards)},
                tally,
            )
            connect = deployment.request_cost(lambda: Engine.from_url(url).close())
            progress.done(url)
            ctx = Context(settings, clusters[0], work_dir, progress, tally)
            children = start_workers(ctx, settings.workers, url=url)
            try:
                groups = {name: c.node_pids for name, c in deployment.clusters.items()}
                groups["workers"] = [c.pid for c in children]
                groups["bench"] = [os.getpid()]
                with Sampler(groups) as sampler:
                    marks = _workload(ctx, engine, deployment, children, sampler)
                    progress.start(f"shards: N={n}, idle for {settings.shard_idle:g}s")
                    time.sleep(IDLE_SETTLE)
                    marks.append(deployment.mark(children, 3, sampler))
                    time.sleep(settings.shard_idle)
                    marks.append(deployment.mark(children, 4, sampler))
                results = stop_all(children)
            finally:
                kill_all(children)
            listing = deployment.request_cost(lambda: engine.list(limit=100))
            writes = _single_writes(engine, deployment, sampler, 30 if settings.smoke else 300)
        finally:
            engine.close()
        placed = _placed(ctx, deployment, "chain_sync" if settings.sync else "chain")
    out = {
        "clusters": n,
        "workload": _workload_figures(settings, deployment, marks, results, placed),
        "idle": _idle_figures(settings, deployment, marks[2], marks[3], results),
        "connect": connect,
        "list": listing,
        "single_writes": writes,
    }
    idle = out["idle"]
    progress.done(
        f"{idle['requests_per_s_per_worker_per_cluster']} requests/s per worker per "
        f"cluster, {idle['raft_entries_per_cluster']} Raft entries per cluster"
    )
    return out


def _single_writes(
    engine: Any, deployment: Deployment, sampler: Sampler, count: int
) -> dict[str, Any]:
    """What one unbatched write costs a leader, as a cross-cluster send does (one request,
    one Raft entry): ``count`` starts of a 1-step workflow, one after another, with no
    worker running (they stay pending), each cluster's leader CPU per start."""
    from bench import app

    ids = [f"{SINGLE_PREFIX}{i}" for i in range(count)]
    first = deployment.mark([], 0, sampler)
    for execution_id in ids:
        engine.start(app.one, 0, execution_id=execution_id)
    last = deployment.mark([], 0, sampler)
    placed = Counter(engine.shards.of(i).name or "unsharded" for i in ids)
    per_cluster = {}
    for name in deployment.clusters:
        cpu = last.cpu[name] - first.cpu[name]
        per_cluster[name] = {
            "writes": placed[name],
            "raft_entries": last.applied[name] - first.applied[name],
            "leader_cpu_s": round(cpu, 3),
            "leader_cpu_ms_per_write": round(cpu / placed[name] * 1000, 3)
            if placed[name]
            else None,
        }
    return {"writes": count, "seconds": round(last.t - first.t, 3), "per_cluster": per_cluster}


def _workload(
    ctx: Context,
    engine: Any,
    deployment: Deployment,
    children: Sequence[Child],
    sampler: Sampler,
) -> list[Mark]:
    """E executions of K steps, from the first start to the last one finished (marks 1, 2)."""
    from bench import app

    s = ctx.settings
    n = len(deployment.clusters)
    ctx.progress.start(f"shards: N={n}, {s.workers}x{s.concurrency}, {s.executions}x{s.steps}")
    workflow: Any = app.chain_sync if s.sync else app.chain
    spec = app.Chain(steps=s.steps, sleep=s.step_sleep)
    first = deployment.mark(children, 1, sampler)
    for i in range(s.executions):
        engine.start(workflow, spec, execution_id=f"{ID_PREFIX}{i}")
    deadline = time.monotonic() + s.phase_timeout
    while True:
        finished = steps = 0
        for cluster in deployment.clusters.values():
            count, done = cluster.query(
                "SELECT (SELECT COUNT(*) FROM steps),"
                " COALESCE(SUM(status IN ('succeeded', 'failed')), 0) FROM executions"
            )[0]
            steps, finished = steps + int(count), finished + int(done)
        ctx.progress.update(f"{steps:,}/{s.total_steps:,} steps")
        if finished >= s.executions:
            break
        _check_alive(children)
        if time.monotonic() > deadline:
            raise TimeoutError(f"shards: {steps}/{s.total_steps} steps after the phase timeout")
        time.sleep(0.25)
    deployment.settle()
    last = deployment.mark(children, 2, sampler)
    ctx.progress.done(f"{s.total_steps:,} steps in {last.t - first.t:.1f}s")
    return [first, last]


@dataclass(frozen=True)
class Placed:
    """Where the executions ran: per cluster, (executions, succeeded, steps) and the step
    rows of all."""

    counts: dict[str, tuple[int, int, int]]
    rows: list[latency.StepRow]


def _placed(ctx: Context, deployment: Deployment, workflow: str) -> Placed:
    counts: dict[str, tuple[int, int, int]] = {}
    rows: list[latency.StepRow] = []
    for name, cluster in deployment.clusters.items():
        executions, succeeded, steps = cluster.query(
            "SELECT COUNT(*), COALESCE(SUM(status = 'succeeded'), 0),"
            " (SELECT COUNT(*) FROM steps) FROM executions WHERE workflow = ?",
            workflow,
        )[0]
        counts[name] = (int(executions), int(succeeded), int(steps))
        rows += step_rows(replace(ctx, cluster=cluster), workflow)
    return Placed(counts, rows)


def _workload_figures(
    settings: Settings,
    deployment: Deployment,
    marks: Sequence[Mark],
    results: Sequence[dict[str, Any]],
    placed: Placed,
) -> dict[str, Any]:
    counted = worker_window(results, 0)
    first, last = marks[0], marks[1]
    per_cluster = deployment.per_cluster(first, last, counted)
    for row in per_cluster:
        executions, succeeded, steps = placed.counts[row["cluster"]]
        row.update(executions=executions, succeeded=succeeded, steps=steps)
        row["raft_per_step"] = round(row["raft_entries"] / steps, 4) if steps else None
    steps = sum(row["steps"] for row in per_cluster)
    for row in per_cluster:
        row["share_of_steps"] = round(row["steps"] / steps, 4) if steps else None
    entries = sum(row["raft_entries"] for row in per_cluster)
    seconds = last.t - first.t
    stats = counted["stats"]
    return {
        "per_cluster": per_cluster,
        "executions": sum(row["executions"] for row in per_cluster),
        "succeeded": sum(row["succeeded"] for row in per_cluster),
        **latency.throughput(placed.rows),
        "seconds": round(seconds, 3),
        "raft_entries": entries,
        "raft_per_step": round(entries / steps, 4) if steps else None,
        "leader_cpu_s": round(sum(row["leader_cpu_s"] for row in per_cluster), 3),
        "requests": sum(row["requests_workers"] + row["requests_client"] for row in per_cluster),
        "requests_by_kind": {k: int(v) for k, v in sorted(counted["requests"].items())},
        "worker_stats": stats,
        "commits_per_request": round(stats["commits"] / stats["commit_requests"], 2)
        if stats.get("commit_requests")
        else None,
        "worker_cpu_s": round(counted["cpu_seconds"], 3),
        "worker_cpu_ms_per_1k_steps": round(counted["cpu_seconds"] / steps * 1e6, 1)
        if steps
        else None,
        "cpu_cores": cores(first.cpu, last.cpu, seconds),
    }


def _idle_figures(
    settings: Settings,
    deployment: Deployment,
    m0: Mark,
    m1: Mark,
    results: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    counted = worker_window(results, 2)
    seconds = m1.t - m0.t
    per_cluster = deployment.per_cluster(m0, m1, counted)
    workers = max(1, settings.workers)
    for row in per_cluster:
        row["requests_per_s_per_worker"] = round(row["requests_workers"] / seconds / workers, 2)
        row["leader_core_percent"] = round(row["leader_cpu_s"] / seconds * 100, 2)
    n = len(per_cluster)
    return {
        "seconds": round(seconds, 3),
        "workers": settings.workers,
        "per_cluster": per_cluster,
        "requests_per_s_per_worker_per_cluster": round(
            sum(r["requests_per_s_per_worker"] for r in per_cluster) / n, 2
        ),
        "raft_entries_per_cluster": round(sum(r["raft_entries"] for r in per_cluster) / n, 2),
        "worker_core_percent_per_worker": round(
            counted["cpu_seconds"] / seconds / workers * 100, 2
        ),
    }
