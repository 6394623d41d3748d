"""A probe of the two requests of a lone 1-step workflow (docs/performance.md, "Latency").

``python -m bench.probe_latency [--rounds R] [--n N]`` starts a local 3-node rqlite cluster
and times, in alternating rounds of N requests each (the machine is noisy: compare
medians of the same round):

- ``raw``: a single-row INSERT into a scratch table (the raw phase's write);
- ``lean``: the lean commit of one step within a worker's turn (``lean_step``);
- ``final unlinked`` / ``final lean`` / ``final full``: the commit of a 1-step workflow's
  outcome with its step's record (``EngineFlows.commit`` of one commit), as the lean final
  commit of an execution without a parent or a limit (``lean_final_unlinked``), as the
  lean one's UPDATE, and as the full commit through the ``execution_commits`` trigger
  chain;
- ``start``: ``StoreFlows.start`` with the first event leased (the start fast path);
- ``start view``: the same start through the start view, with the read of its outcome
  (every start without a limit or a debounce before ``start_direct``).

Each final commit commits an execution started (leased) just before, outside the timing.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from raftflow.engine.workflow.events import RUN, RUN_TEXT
from raftflow.stores.commit import Commit
from raftflow.stores.flows import QUERIES, start_params
from raftflow.stores.records import Status
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.rqlite.local.cluster import LocalCluster

from raftflow import Engine

RAW = "INSERT INTO probe_raw (v) VALUES (:v)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument(
        "--only", default="raw,lean,final unlinked,final lean,final full,start,start view"
    )
    args = parser.parse_args()
    kinds = [k.strip() for k in args.only.split(",")]
    with LocalCluster(3) as cluster:
        backend = Engine.from_url(cluster.urls, auto_migrate=True).store
        backend.run(_single(Statement("probe.create", "CREATE TABLE probe_raw (v INTEGER)")))
        worker = f"probe:{uuid.uuid4().hex[:8]}"

        def started() -> Commit:
            token = f"{worker}:{uuid.uuid4().hex}"
            eid = uuid.uuid4().hex
            outcome = backend.run(
                backend.flows.start(eid, "probe", None, 0, RUN, lease_token=token)
            )
            assert outcome.lease_seq is not None
            return Commit(
                execution_id=eid,
                lease_seq=outcome.lease_seq,
                lease_token=token,
                worker_id=worker,
                step_idx=0,
                step_name="step",
                step_status="succeeded",
                step_output="1",
                step_started_at=time.time(),
                status=Status.SUCCEEDED,
                output="1",
            )

        def final(full: bool, unlinked: bool = False) -> Callable[[], float]:
            def once() -> float:
                commit = replace(started(), full=full, unlinked=unlinked)
                assert commit.lean_final is not full
                t = time.perf_counter()
                (outcome,) = backend.run(backend.commits.commit([commit], 30.0))
                elapsed = time.perf_counter() - t
                assert outcome.applied
                return elapsed

            return once

        def lean() -> float:
            base = started()
            commit = replace(
                base, status=Status.RUNNING, output=None, step_kind="step", step_attempts=1,
                next_token=base.lease_token,
            )  # fmt: skip
            assert commit.lean
            t = time.perf_counter()
            (outcome,) = backend.run(backend.commits.commit([commit], 30.0))
            elapsed = time.perf_counter() - t
            assert outcome.applied
            return elapsed

        def raw() -> float:
            t = time.perf_counter()
            backend.run(_single(Statement("probe.raw", RAW, {"v": 1})))
            return time.perf_counter() - t

        def start() -> float:
            token = f"{worker}:{uuid.uuid4().hex}"
            t = time.perf_counter()
            backend.run(
                backend.flows.start(uuid.uuid4().hex, "probe", None, 0, RUN, lease_token=token)
            )
            return time.perf_counter() - t

        def start_view() -> float:
            token = f"{worker}:{uuid.uuid4().hex}"
            eid, now = uuid.uuid4().hex, time.time()
            params = start_params(
                eid, "probe", "null", 0, RUN_TEXT, now, uuid.uuid4().hex,
                lease_token=token, lease_expiry=now + 30,
            )  # fmt: skip
            read = {"id": eid, "commit_id": params["commit_id"], "lease_token": token}
            statements = (QUERIES("start", params), QUERIES("start_outcome", read))
            t = time.perf_counter()
            backend.run(_request(Request(statements, transaction=True)))
            return time.perf_counter() - t

        probes = {
            "raw": raw,
            "lean": lean,
            "final unlinked": final(False, unlinked=True),
            "final lean": final(False),
            "final full": final(True),
            "start": start,
            "start view": start_view,
        }
        alternate({kind: probes[kind] for kind in kinds}, args.rounds, args.n)
        backend.close()


def alternate(probes: dict[str, Callable[[], float]], rounds: int, n: int) -> None:
    """Time each probe ``n`` times per round, in alternating order, and print the medians
    of each round and of all (the machine is noisy: compare within a round)."""
    kinds = list(probes)
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    for round_ in range(rounds):
        order = kinds if round_ % 2 == 0 else list(reversed(kinds))
        line = []
        for kind in order:
            times = [probes[kind]() for _ in range(n)]
            samples[kind] += times
            line.append(f"{kind} {statistics.median(times) * 1000:.2f}")
        print(f"round {round_}: " + ", ".join(line) + " (ms p50)", flush=True)
    for kind, times in samples.items():
        print(f"{kind:12s} p50 {statistics.median(times) * 1000:.2f} ms  n={len(times)}")


def _single(statement: Statement):  # type: ignore[no-untyped-def]
    yield from _request(Request((statement,)))


def _request(request: Request):  # type: ignore[no-untyped-def]
    response = yield request
    response.raise_for_errors()


if __name__ == "__main__":
    main()
