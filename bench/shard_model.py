"""``python -m bench.shard_model``: a model of N = 8..64 clusters, each on machines of its
own, fed with what ``python -m bench --shards 1,2,3`` measured on one machine.

    python -m bench --shards 1,2,3                  # writes bench/results/shards.json
    python -m bench.shard_model                     # reads it
    python -m bench.shard_model --from a.json b.json c.json --send-share 0.1

**Measured** (medians over every cluster of every run given): a leader's CPU per step and
the Raft entries per step under the workload; a leader's CPU per unbatched write (a start
with no worker running: one request, one Raft entry, as a cross-cluster send); the
workers' CPU per step; an idle worker's requests per second per cluster and the leader's
CPU per such request; the Raft entries a process's connect costs the catalog's cluster
and every other one; the time of one ``list()`` per cluster it asks.

**Computed** from the hash: the busiest cluster's share of the load over the mean (the
*skew*), for ``--keys`` routing keys of equal load hashed onto ``--partitions`` partitions
(:func:`raftflow.engine.shards.partitions.partition_of`), dealt to N clusters in turn as a
new deployment's catalog deals them.

**Assumed** (flags): the cores a leader machine gives rqlite (``--leader-cores``: rqlite
applies one write at a time; a 3-node cluster's leader also ships each entry to two
followers, which single-node clusters did not measure, so the figures are optimistic); a
worker process's cores (``--worker-cores``: Python, about one); the share of steps that
send to another execution (``--send-share``, its target uniformly random: on another
cluster with probability (N-1)/N, where it costs one request and one Raft entry that no
batch shares, priced as an unbatched write); process starts per second
(``--process-starts``); list() calls per second (``--list-calls``).

The deployment's throughput is N leaders' worth divided by the skew (the busiest leader
saturates first) and by the sends' extra cost. What does not shrink with N is printed
beside it: every process start costs every cluster a Raft entry (and the catalog's one
more), every ``list()`` asks every cluster in turn, every worker that serves every
cluster polls each of them while idle.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from raftflow.engine.runtime.run import MAX_SHARDED_POLL, idle_poll_cap
from raftflow.engine.runtime.worker import WorkerOptions

from bench.report import _num, _table
from bench.settings import RESULTS


@dataclass(frozen=True)
class Measured:
    """The per-cluster figures of ``--shards`` runs (medians)."""

    runs: int
    leader_cpu_per_step: float  # seconds
    raft_per_step: float
    leader_cpu_per_write: float  # seconds, an unbatched write
    worker_cpu_per_step: float  # seconds
    idle_requests_per_s: float  # per worker, on one cluster
    leader_cpu_per_idle_request: float  # seconds (with the node's own idle CPU: an upper bound)
    connect_catalog_entries: float
    connect_other_entries: float
    list_seconds_per_cluster: float

    @classmethod
    def read(cls, paths: Sequence[Path]) -> Measured:
        runs = []
        for path in paths:
            try:
                runs += json.loads(path.read_text())["shards"]["runs"]
            except (OSError, ValueError, KeyError) as exc:
                raise SystemExit(
                    f"{path}: not the JSON of a `python -m bench --shards` run ({exc!r})"
                ) from None
        clusters = [c for run in runs for c in run["workload"]["per_cluster"] if c["steps"]]
        idle = [  # one cluster's: the sharded spread is applied per N by the model
            c
            for run in runs
            if run["clusters"] == 1
            for c in run["idle"]["per_cluster"]
            if c["requests_workers"]
        ]
        sharded = [run for run in runs if run["clusters"] > 1]
        if not clusters or not idle or not sharded:
            raise SystemExit("the runs given hold no loaded cluster, idle window at N = 1 or N > 1")
        connects = [list(run["connect"]["per_cluster"].values()) for run in sharded]
        measured = cls(
            runs=len(paths),
            leader_cpu_per_step=_median(c["leader_cpu_s"] / c["steps"] for c in clusters),
            raft_per_step=_median(c["raft_entries"] / c["steps"] for c in clusters),
            leader_cpu_per_write=_median(
                w["leader_cpu_ms_per_write"] / 1000
                for run in runs
                for w in run["single_writes"]["per_cluster"].values()
                if w["writes"]
            ),
            worker_cpu_per_step=_median(
                run["workload"]["worker_cpu_s"] / run["workload"]["steps"] for run in runs
            ),
            idle_requests_per_s=_median(c["requests_per_s_per_worker"] for c in idle),
            leader_cpu_per_idle_request=_median(
                c["leader_cpu_s"] / c["requests_workers"] for c in idle
            ),
            connect_catalog_entries=_median(costs[0]["raft_entries"] for costs in connects),
            connect_other_entries=_median(
                cost["raft_entries"] for costs in connects for cost in costs[1:]
            ),
            list_seconds_per_cluster=_median(
                run["list"]["seconds"] / run["clusters"] for run in sharded
            ),
        )
        if measured.leader_cpu_per_step <= 0:
            raise SystemExit("the runs measured no leader CPU: too small (a --smoke run?)")
        return measured


def _median(values: Any) -> float:
    found = list(values)
    return float(statistics.median(found)) if found else 0.0


def skews(sizes: Sequence[int], partitions: int, keys: int) -> dict[int, float]:
    """The busiest cluster's load over the mean, for ``keys`` routing keys of equal load
    hashed onto ``partitions`` and dealt to each N of ``sizes`` clusters in turn."""
    from raftflow.engine.shards.partitions import partition_of
    from raftflow.stores.catalog import Catalog

    load = Counter(partition_of(f"key-{i}", partitions) for i in range(keys))
    out = {}
    for n in sizes:
        catalog = Catalog.spread(partitions, [str(c) for c in range(n)])
        per_cluster = Counter[str]()
        for partition, count in load.items():
            per_cluster[catalog.assignment[partition]] += count
        out[n] = max(per_cluster.values()) / (keys / n)
    return out


@dataclass(frozen=True)
class Assumed:
    sizes: tuple[int, ...]
    partitions: int
    keys: int
    leader_cores: float
    worker_cores: float
    send_share: float
    process_starts: float
    list_calls: float


def project(m: Measured, a: Assumed) -> list[dict[str, Any]]:
    """One row per N: the projected throughput and what would bound it."""
    skew = skews(a.sizes, a.partitions, a.keys)
    finer = skews(a.sizes, 4 * a.partitions, a.keys)
    one_leader = a.leader_cores / m.leader_cpu_per_step
    rows = []
    for n in a.sizes:
        cross = a.send_share * (n - 1) / n  # cross-cluster sends per step
        per_step = m.leader_cpu_per_step + cross * m.leader_cpu_per_write
        steps = n * a.leader_cores / per_step / skew[n]
        workers = math.ceil(steps * m.worker_cpu_per_step / a.worker_cores)
        # per leader, every worker on every cluster, its idle polls spread over them
        polls = workers * m.idle_requests_per_s * idle_spread(n)
        catalog_cpu = (
            a.process_starts * (m.connect_catalog_entries * m.leader_cpu_per_write) / a.leader_cores
        )
        rows.append(
            {
                "clusters": n,
                "partitions_per_cluster": f"{a.partitions // n}-{math.ceil(a.partitions / n)}",
                "skew": round(skew[n], 3),
                "skew_4x_partitions": round(finer[n], 3),
                "linear_steps_per_s": round(n * one_leader),
                "steps_per_s": round(steps),
                "share_of_linear": round(steps / (n * one_leader), 3),
                "lost_to_sends": round(1 - m.leader_cpu_per_step / per_step, 3),
                "cross_cluster_sends_per_step": round(cross, 4),
                "raft_per_step": round(m.raft_per_step + cross, 4),
                "worker_cores": round(steps * m.worker_cpu_per_step, 1),
                "worker_processes": workers,
                "idle_polls_per_s_per_leader": round(polls),
                "idle_polls_leader_core_percent": round(
                    polls * m.leader_cpu_per_idle_request / a.leader_cores * 100, 1
                ),
                "catalog_leader_core_percent": round(catalog_cpu * 100, 2),
                "process_start_raft_entries": round(
                    m.connect_catalog_entries + (n - 1) * m.connect_other_entries, 1
                ),
                "list_ms": round(n * m.list_seconds_per_cluster * 1000, 1),
                "list_requests_per_s_per_leader": a.list_calls,
            }
        )
    return rows


def render(m: Measured, a: Assumed, rows: Sequence[dict[str, Any]]) -> str:
    one_leader = a.leader_cores / m.leader_cpu_per_step
    lines = [
        f"measured (medians of {m.runs} --shards run(s)): leader CPU "
        f"{m.leader_cpu_per_step * 1e3:.3f} ms/step -> {one_leader:,.0f} steps/s per leader "
        f"at {a.leader_cores:g} core; {m.raft_per_step:.3f} Raft entries/step; leader CPU "
        f"{m.leader_cpu_per_write * 1e3:.2f} ms per unbatched write; worker CPU "
        f"{m.worker_cpu_per_step * 1e3:.3f} ms/step; idle: {m.idle_requests_per_s:.1f} "
        f"requests/s per worker on one cluster, {m.leader_cpu_per_idle_request * 1e3:.2f} ms "
        f"leader CPU each; a connect: {m.connect_catalog_entries:g} Raft entries on the "
        f"catalog's cluster, {m.connect_other_entries:g} on each other; list(): "
        f"{m.list_seconds_per_cluster * 1e3:.1f} ms per cluster",
        f"assumed: {a.partitions} partitions, {a.keys:,} routing keys of equal load, "
        f"{a.leader_cores:g} core per leader, {a.worker_cores:g} per worker process, "
        f"{a.send_share:g} sends per step (to a random execution), {a.process_starts:g} "
        f"process starts/s, {a.list_calls:g} list() calls/s",
        "",
        _table(
            [
                "N",
                "partitions each",
                "skew",
                f"skew, {4 * a.partitions} partitions",
                "linear steps/s",
                "projected steps/s",
                "of linear",
                "Raft entries/step",
                "worker cores (processes)",
                "idle polls/s per leader",
                "their leader core %",
                "catalog leader core %",
                "Raft entries per process start",
                "list() ms",
            ],
            [
                [
                    str(r["clusters"]),
                    r["partitions_per_cluster"],
                    _num(r["skew"], 3),
                    _num(r["skew_4x_partitions"], 3),
                    _num(r["linear_steps_per_s"]),
                    _num(r["steps_per_s"]),
                    _num(r["share_of_linear"], 2),
                    _num(r["raft_per_step"], 3),
                    f"{r['worker_cores']:,.1f} ({r['worker_processes']})",
                    _num(r["idle_polls_per_s_per_leader"]),
                    _num(r["idle_polls_leader_core_percent"], 1),
                    _num(r["catalog_leader_core_percent"], 2),
                    _num(r["process_start_raft_entries"], 0),
                    _num(r["list_ms"], 1),
                ]
                for r in rows
            ],
        ),
        "",
        *bounds(a, rows),
    ]
    return "\n".join(lines)


def idle_spread(clusters: int) -> float:
    """What a worker's idle polls of one cluster come to on ``clusters``, against one
    cluster's (engine/runtime/run.py's spread)."""
    base = WorkerOptions.max_poll_interval
    return base / idle_poll_cap(base, clusters)


def spread_capped() -> int:
    """The fewest clusters on which each is polled at most once a second."""
    base = WorkerOptions.max_poll_interval
    return next(n for n in range(1, 10_000) if idle_poll_cap(base, n) >= MAX_SHARDED_POLL)


def bounds(a: Assumed, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Where it stops scaling, in words, from the rows."""
    uneven = [r["clusters"] for r in rows if a.partitions % r["clusters"]]
    worst = max(rows, key=lambda r: r["skew"])
    last = rows[-1]
    polls = last["idle_polls_leader_core_percent"]
    half_core = last["clusters"] * 50 / polls if polls else math.inf
    return [
        f"- leaders: throughput grows as N / skew. The skew is worst at N = "
        f"{worst['clusters']} ({worst['skew']:.3f}): "
        + (
            f"{a.partitions} partitions do not divide evenly over N = "
            f"{', '.join(map(str, uneven))} (some clusters hold one partition more); "
            if uneven
            else ""
        )
        + f"with {4 * a.partitions} partitions it would be {worst['skew_4x_partitions']:.3f}. "
        "Partitions are fixed when a deployment is created: take at least 16 per cluster "
        "you may ever run, or a number the cluster counts divide. A single hot routing key "
        "is one partition's load whatever P is.",
        f"- cross-cluster sends: {a.send_share:g} sends per step add up to "
        f"{last['cross_cluster_sends_per_step']:.3f} unbatched Raft entries per step at N = "
        f"{last['clusters']} ({last['raft_per_step']:.3f} in all): "
        f"{last['lost_to_sends']:.0%} of the throughput there.",
        f"- workers: N = {last['clusters']} needs {last['worker_cores']:,.0f} worker cores "
        f"({last['worker_processes']} processes); given every cluster, each of them polls "
        "every cluster while idle, spread (each cluster at most once a second from N = "
        f"{spread_capped()}): {last['idle_polls_per_s_per_leader']:,} weak reads/s per "
        f"leader ({last['idle_polls_leader_core_percent']}% of a core, an upper bound: with "
        f"the node's own idle CPU), growing with the workers, so with N: half a core at N ~ "
        f"{half_core:,.0f}. Give "
        "each worker the clusters of its own machines instead: the polls per leader then "
        "stay what one machine's workers send.",
        f"- the catalog: every process start reads it (strongly) on the first cluster and "
        f"checks every cluster's identity and schema (weak reads when all is current): "
        f"{last['process_start_raft_entries']:g} Raft entry(ies) in all at N = "
        f"{last['clusters']}; {a.process_starts:g} starts/s take "
        f"{last['catalog_leader_core_percent']}% of the catalog's leader. It bounds only "
        "short-lived processes (a client per request), not steps.",
        f"- list(): asks the clusters one after another, {last['list_ms']} ms at N = "
        f"{last['clusters']}, merging up to N x limit rows; every call is a read on every "
        "cluster, whatever N.",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.shard_model", description=__doc__)
    p.add_argument("--from", dest="paths", type=Path, nargs="+", default=[RESULTS / "shards.json"])
    p.add_argument("--sizes", default="8,16,24,32,48,64", help="the N to project")
    p.add_argument("--partitions", type=int, default=256)
    p.add_argument("--keys", type=int, default=100_000, help="routing keys of equal load")
    p.add_argument("--leader-cores", type=float, default=1.0)
    p.add_argument("--worker-cores", type=float, default=1.0)
    p.add_argument("--send-share", type=float, default=0.05, help="sends per step")
    p.add_argument("--process-starts", type=float, default=10.0, help="per second, in all")
    p.add_argument("--list-calls", type=float, default=1.0, help="per second, in all")
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = p.parse_args(argv)
    try:
        sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip())
    except ValueError:
        raise SystemExit(f"--sizes: comma-separated integers, not {args.sizes!r}") from None
    if not sizes or min(sizes) < 1 or args.partitions < max(sizes) or args.keys < 1:
        raise SystemExit("--sizes >= 1, --partitions >= the largest size, --keys >= 1")
    measured = Measured.read(args.paths)
    assumed = Assumed(
        sizes,
        args.partitions,
        args.keys,
        args.leader_cores,
        args.worker_cores,
        args.send_share,
        args.process_starts,
        args.list_calls,
    )
    rows = project(measured, assumed)
    print(render(measured, assumed, rows))
    if args.json is not None:
        args.json.write_text(json.dumps({"measured": asdict(measured), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
