"""``python -m bench.retention``: does retention leave claims flat, and does the database
stop growing under a steady load? (issue "Durable primitives II", retention)

``--phase claims`` (a fresh local 3-node rqlite cluster):

1. ``--expired`` (100k) finished executions, ended 60 days ago, with ``--steps`` (2) step
   records each, are inserted in bulk (one ``INSERT ... SELECT`` per table), and
   ``--queued`` (1,000) pending executions are started (the start statement of
   ``stores.flows.start_params``, in requests of 1,000) for the probe to claim.
2. A probe claims one event after another (the worker's own claim request: the queue's
   claim and the store's claim context, one ``/db/request?transaction``), gives it back at
   once (so the queue holds), and times each claim.
3. Rounds of ``--round`` seconds alternate: retention off, retention on (the worker's
   own :class:`~raftflow.engine.runtime.retention.Retention` pacing, batch by batch), until
   nothing expired is left or ``--pairs`` pairs ran. The claim's p50/p99 in the on rounds
   against the off rounds is the answer.

``--phase growth``: a worker with ``retention=--keep`` seconds and a client starting
2-step workflows back to back for ``--duration`` seconds; every ``--sample`` seconds the
leader's SQLite file (``db.sqlite``, with its WAL) and its Raft log/snapshots (``rsnapshots``,
``raft.db``) are measured, and the executions kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from raftflow.transports.rqlite.local import LocalCluster

from bench.cluster import BenchCluster
from raftflow import Engine

DAY = 86_400.0
SERIES = (
    "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT i FROM n)"
)
#: The i-th expired execution's id: a multiplicative hash of i (a permutation of 32 bits).
SCATTERED = "printf('%08x-old', ((? + i) * 2654435761) % 4294967296)"
RELEASE = "UPDATE messages SET locked_by = NULL, lock_expiry = 0 WHERE locked_by = ?"


def fill_expired(bench: BenchCluster, count: int, steps: int) -> None:
    """``count`` finished executions with ``steps`` step records each. Their ids are
    scattered over the key space like real ones (uuid4 hex; a multiplicative hash of the
    number here: rqlite does not rewrite randomblob()), so that deleting them in end-time
    order touches the pages a real deletion touches."""
    old = time.time() - 60 * DAY
    output = json.dumps({"order": "x" * 40, "total": 1234})
    for start in range(0, count, 50_000):
        n = min(50_000, count - start)
        bench.execute(
            [
                [
                    "INSERT INTO executions (id, workflow, status, input, created_at, updated_at,"
                    " completed_at, output, steps_done) SELECT"
                    f" {SCATTERED},"
                    " 'checkout', 'succeeded', '{\"cart\": 42}', ? + i, ? + i, ? + i, ?, ?"
                    f" FROM {SERIES}",
                    start,
                    old,
                    old,
                    old,
                    output,
                    steps,
                    n,
                ],
                *[
                    [
                        "INSERT INTO steps (execution_id, idx, name, status, output, started_at,"
                        f" ended_at, worker_id) SELECT {SCATTERED}, ?, 'charge',"
                        f" 'succeeded', ?, ?, ?, 'w' FROM {SERIES}",
                        start,
                        idx,
                        output,
                        old,
                        old,
                        n,
                    ]
                    for idx in range(steps)
                ],
            ]
        )


def fill_queued(bench: BenchCluster, count: int) -> None:
    from raftflow.engine.workflow.events import RUN
    from raftflow.stores.flows import QUERIES as STORE
    from raftflow.stores.flows import start_params
    from raftflow.transports.payload import to_json

    event = to_json(RUN, what="event")
    now = time.time()
    statements = []
    for i in range(count):
        params = start_params(f"queued-{i:07d}", "checkout", "{}", 0, event, now, uuid.uuid4().hex)
        statement = STORE("start", params)
        statements.append([statement.sql, statement.params])
    for start in range(0, len(statements), 1000):
        bench.execute(statements[start : start + 1000])


class Probe:
    """Claims and gives back one event after another, timing each claim."""

    def __init__(self, url: str) -> None:

        self.engine = Engine.from_url(url)
        self.samples: list[tuple[float, float]] = []  # (monotonic time, claim seconds)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        from raftflow.stores.claim import claim_context
        from raftflow.transports.db.flow import Request, Statement, run_flow

        conn, flows = self.engine.store.database.connection, self.engine.transport.flows
        while not self.stop.is_set():
            now = run_flow(conn, flows.clock.now())
            token = f"probe:{uuid.uuid4().hex}"
            request = Request(
                flows.claim_statements(token, now, now + 30.0, 1, 0) + claim_context(token, now)
            )
            started = time.perf_counter()
            conn.send(request).raise_for_errors()
            self.samples.append((time.monotonic(), time.perf_counter() - started))
            conn.send(Request((Statement("bench.release", RELEASE, (token,)),)))
            time.sleep(0.005)

    def between(self, start: float, end: float) -> list[float]:
        return [s for t, s in self.samples if start <= t < end]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def claims_phase(args: argparse.Namespace) -> dict[str, Any]:
    from raftflow.engine.runtime.retention import Retention
    from raftflow.engine.runtime.worker import WorkerOptions

    with LocalCluster(3) as cluster:
        bench = BenchCluster(cluster)
        url = bench.leader_url
        Engine.from_url(url, auto_migrate=True).close()
        t0 = time.monotonic()
        fill_expired(bench, args.expired, args.steps)
        fill_queued(bench, args.queued)
        print(f"filled in {time.monotonic() - t0:.1f}s", flush=True)
        store = Engine.from_url(url).store.to_async()
        overrides: dict[str, Any] = {}
        if args.batch:
            overrides["retention_batch"] = args.batch
        if args.share:
            overrides["retention_share"] = args.share
        options = WorkerOptions(**overrides)
        worker: Any = SimpleNamespace(
            options=options,
            worker_id="bench-retention",
            running=lambda: 0,
            draining=lambda: False,
        )
        probe = Probe(url)
        probe.thread.start()
        rounds: list[dict[str, Any]] = []

        async def drive_rounds() -> None:
            from datetime import timedelta

            retention = Retention(worker, store, timedelta(days=30))
            retention.held = True
            await asyncio.sleep(2.0)  # the probe warms up
            for pair in range(args.pairs):
                for on in (False, True):
                    start = time.monotonic()
                    before = retention.deleted
                    retention.took = []
                    if on:
                        task = asyncio.create_task(retention.drain())
                        await asyncio.sleep(args.round)
                        task.cancel()
                        await asyncio.gather(task, return_exceptions=True)
                    else:
                        await asyncio.sleep(args.round)
                    end = time.monotonic()
                    claims = probe.between(start, end)
                    row = {
                        "start": start,
                        "end": end,
                        "pair": pair,
                        "retention": on,
                        "deleted": retention.deleted - before,
                        "claims": len(claims),
                        "p50_ms": round(pct(claims, 0.5), 2),
                        "p99_ms": round(pct(claims, 0.99), 2),
                        "batches": len(retention.took),
                        "batch_p50_ms": round(pct(retention.took, 0.5), 1) if on else None,
                        "batch_max_ms": round(max(retention.took, default=0) * 1000, 1),
                    }
                    rounds.append(row)
                    print(
                        json.dumps({k: v for k, v in row.items() if k not in ("start", "end")}),
                        flush=True,
                    )
                if retention.deleted >= args.expired:
                    break
            await store.close()

        try:
            asyncio.run(drive_rounds())
        finally:
            probe.stop.set()
            probe.thread.join()
            probe.engine.close()
        off = [r for r in rounds if not r["retention"]]
        on = [r for r in rounds if r["retention"] and r["deleted"]]

        def med(rows: list[dict[str, Any]], key: str) -> float:
            return statistics.median(r[key] for r in rows) if rows else float("nan")

        def pooled(rows: list[dict[str, Any]]) -> list[float]:
            return [s for r in rows for s in probe.between(r["start"], r["end"])]

        off_claims, on_claims = pooled(off), pooled(on)
        summary = {
            "expired": args.expired,
            "batch": options.retention_batch,
            "share": options.retention_share,
            "deleted": sum(r["deleted"] for r in rounds),
            "on_rounds": len(on),
            "off_claims": len(off_claims),
            "on_claims": len(on_claims),
            "off_p50_ms": round(pct(off_claims, 0.5), 2),
            "on_p50_ms": round(pct(on_claims, 0.5), 2),
            "off_p99_ms": round(pct(off_claims, 0.99), 2),
            "on_p99_ms": round(pct(on_claims, 0.99), 2),
            "median_round_p50_off_on": [med(off, "p50_ms"), med(on, "p50_ms")],
            "median_round_p99_off_on": [med(off, "p99_ms"), med(on, "p99_ms")],
        }
        print(json.dumps(summary), flush=True)
        return {"rounds": rounds, "summary": summary}


def dir_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def steady_load(
    cluster: LocalCluster,
    *,
    keep: float,
    duration: float,
    sample: float = 10.0,
    clients: int = 4,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """``clients`` threads start 2-step workflows back to back for ``duration`` seconds,
    run by one worker (concurrency 8) of ``Engine(retention=keep seconds)``; every
    ``sample`` seconds, the leader's files and what the database holds."""
    from datetime import timedelta

    from raftflow import Engine

    bench = BenchCluster(cluster)
    engine = Engine.from_url(bench.leader_url, retention=timedelta(seconds=keep))

    @engine.step
    def add(a: int, b: int) -> int:
        return a + b

    @engine.workflow
    def adder(n: int) -> int:
        return add(add(n, 1), 1)

    stop = threading.Event()
    finished = [0]

    def client() -> None:
        n = 0
        while not stop.is_set():
            engine.start(adder, n).result(timeout=120)
            finished[0] += 1
            n += 1

    samples: list[dict[str, Any]] = []
    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    t0 = time.monotonic()
    try:
        with engine.running_worker(concurrency=8):
            for thread in threads:
                thread.start()
            while time.monotonic() - t0 < duration:
                time.sleep(sample)
                bench.refresh()
                data = bench.nodes[0].data_dir
                row = {
                    "t": round(time.monotonic() - t0, 1),
                    "executions_run": finished[0],
                    "kept": int(bench.scalar("SELECT COUNT(*) FROM executions")),
                    "steps_kept": int(bench.scalar("SELECT COUNT(*) FROM steps")),
                    "page_count": int(bench.scalar("PRAGMA page_count")),
                    "freelist_count": int(bench.scalar("PRAGMA freelist_count")),
                    "db_bytes": dir_bytes(data / "db.sqlite"),
                    "wal_bytes": dir_bytes(data / "db.sqlite-wal"),
                    "raft_db_bytes": dir_bytes(data / "raft.db"),
                    "snapshots_bytes": dir_bytes(data / "rsnapshots"),
                    "applied_index": bench.raft_mark().applied_index,
                }
                samples.append(row)
                if report is not None:
                    report(row)
            stop.set()
            for thread in threads:
                thread.join()
    finally:
        stop.set()
        engine.close()
        bench.http.close()
    return samples


def growth_phase(args: argparse.Namespace) -> dict[str, Any]:
    with LocalCluster(3) as cluster:
        samples = steady_load(
            cluster,
            keep=args.keep,
            duration=args.duration,
            sample=args.sample,
            clients=args.clients,
            report=lambda row: print(json.dumps(row), flush=True),
        )
    return {"keep_s": args.keep, "samples": samples}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.retention", description=__doc__)
    p.add_argument("--phase", choices=("claims", "growth"), default="claims")
    p.add_argument("--expired", type=int, default=100_000)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--queued", type=int, default=1000)
    p.add_argument("--round", type=float, default=5.0)
    p.add_argument("--pairs", type=int, default=40)
    p.add_argument("--batch", type=int, default=0, help="retention_batch (0: the default)")
    p.add_argument("--share", type=float, default=0.0, help="retention_share (0: the default)")
    p.add_argument("--keep", type=float, default=5.0, help="growth: retention, seconds")
    p.add_argument("--duration", type=float, default=180.0, help="growth: seconds")
    p.add_argument("--sample", type=float, default=10.0, help="growth: seconds between samples")
    p.add_argument("--clients", type=int, default=4, help="growth: client threads")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    result = claims_phase(args) if args.phase == "claims" else growth_phase(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
