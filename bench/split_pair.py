"""What a split pair costs beside a fused one: ``python -m bench.split_pair``.

Two local 3-node rqlite clusters, Q and S. Each round runs the same load twice, in
alternation: ``--clients`` client threads each ``start()`` a 5-step workflow
(``bench.app``'s ``chain``) and wait for its ``result()``, on an in-process worker of
concurrency ``--clients``,

- **fused**: the transport and the store on Q (one cluster: the commit carries the ack);
- **split**: the transport on Q, the store on S (stores/split.py: the commit on S, then the
  ack and the relay on Q).

Printed per run (one JSON object per line, then the medians per mode): steps/s, and per
step the requests and Raft entries on each cluster (bench.counting's tally of this
process's requests: a write, or a strong read, is a Raft entry).
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

from raftflow.stores.rqlite import RqliteStore
from raftflow.transports.rqlite import RqliteTransport
from raftflow.transports.rqlite.local import LocalCluster

from bench.counting import Tally, instrument
from raftflow import Engine

STEPS = 5


def _engine(transport_url: str, store_url: str) -> Engine:
    from bench import app

    engine = Engine(
        transport=RqliteTransport.from_url(transport_url),
        store=RqliteStore.from_url(store_url),
    )
    engine.registry = app.engine.registry  # the benchmark's workflows, on this pair
    return engine


def _run(
    tally: Tally, mode: str, queue: str, state: str, clients: int, executions: int
) -> dict[str, Any]:
    from bench import app
    from bench.turnaround import clients_run

    engine = _engine(queue, state if mode == "split" else queue)
    try:
        with engine.running_worker(concurrency=clients):
            before_requests, before_raft = dict(tally.clusters), dict(tally.clusters_raft)
            out = clients_run(engine, app.chain, clients, executions)
            requests = {k: v - before_requests.get(k, 0) for k, v in tally.clusters.items()}
            raft = {k: v - before_raft.get(k, 0) for k, v in tally.clusters_raft.items()}
    finally:
        engine.close()
    steps = out["executions"] * STEPS
    q_host = queue.split("://", 1)[1]

    def per_step(counts: dict[str, int]) -> dict[str, float]:
        return {
            ("Q" if q_host in identity else "S"): round(count / steps, 3)
            for identity, count in sorted(counts.items())
        }

    return {
        "mode": mode,
        "steps_per_s": out["steps_per_s"],
        "requests_per_step": per_step(requests),
        "raft_entries_per_step": per_step(raft),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--executions", type=int, default=320)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    tally = Tally(keep_samples=False)
    instrument(tally)  # this process's requests, by cluster
    with LocalCluster(3) as q_cluster, LocalCluster(3) as s_cluster:
        queue, state = q_cluster.url, s_cluster.url
        for _ in range(args.rounds):
            for mode in ("fused", "split"):
                run = _run(tally, mode, queue, state, args.clients, args.executions)
                print(json.dumps(run), flush=True)
                runs.append(run)
    for mode in ("fused", "split"):
        mine = [r for r in runs if r["mode"] == mode]
        medians = {
            "mode": mode,
            "median_steps_per_s": statistics.median(r["steps_per_s"] for r in mine),
            "median_raft_entries_per_step": {
                name: statistics.median(r["raft_entries_per_step"].get(name, 0.0) for r in mine)
                for name in ("Q", "S")
            },
            "median_requests_per_step": {
                name: statistics.median(r["requests_per_step"].get(name, 0.0) for r in mine)
                for name in ("Q", "S")
            },
        }
        print(json.dumps(medians), flush=True)


if __name__ == "__main__":
    main()
