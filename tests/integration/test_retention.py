"""Retention on a real cluster: 20k (100k with `make test-retention`) finished executions
older than the retention period (and their steps) are deleted in small batches by the
worker holding the retention duty while workflows keep running; unfinished executions,
however old, and recent ones stay."""

from __future__ import annotations

import itertools
import logging
import os
import statistics
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine

#: Expired executions inserted: 20k in the suite; `make test-retention` runs 100k.
OLD = int(os.environ.get("RAFTFLOW_RETENTION_ROWS", "20000"))
DAY = 86_400.0


def execute(url: str, sql: str, *params: object) -> None:
    response = httpx.post(f"{url}/db/execute", json=[[sql, *params]], timeout=120)
    response.raise_for_status()
    (result,) = response.json()["results"]
    assert "error" not in result, result["error"]


def scalar(url: str, sql: str) -> int:
    response = httpx.post(f"{url}/db/query?level=strong", json=[[sql]], timeout=30)
    response.raise_for_status()
    return int(response.json()["results"][0]["values"][0][0])


def test_expired_executions_are_deleted_in_batches_while_workflows_run(
    cluster: LocalCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="raftflow.worker")
    url = cluster.url
    engine = Engine.from_url(url, retention=timedelta(days=30))

    @engine.step
    def add(a: int, b: int) -> int:
        return a + b

    @engine.workflow
    def adder(n: int) -> int:
        return add(add(n, 1), 1)

    now = time.time()
    old = now - 60 * DAY
    # 100k executions that ended 40-60 days ago, one step each: one statement per table.
    series = (
        "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
        "SELECT i FROM n)"
    )
    execute(
        url,
        "INSERT INTO executions (id, workflow, status, input, created_at, updated_at,"
        " completed_at, output) SELECT 'old-' || i, 'adder', 'succeeded', '1', ?, ?,"
        f" ? + i * 10, '3' FROM {series}",
        old,
        old,
        old,
        OLD,
    )
    execute(
        url,
        "INSERT INTO steps (execution_id, idx, name, status, output, started_at, ended_at,"
        f" worker_id) SELECT 'old-' || i, 0, 'add', 'succeeded', '2', ?, ?, 'w' FROM {series}",
        old,
        old,
        OLD,
    )
    # Old but unfinished: never deleted. Finished recently: kept.
    for id_, status, completed in [
        ("old-pending", "pending", None),
        ("old-running", "running", None),
        ("recent", "succeeded", now - DAY),
    ]:
        execute(
            url,
            "INSERT INTO executions (id, workflow, status, input, created_at, updated_at,"
            " completed_at) VALUES (?, 'adder', ?, '1', ?, ?, ?)",
            id_,
            status,
            old,
            old,
            completed,
        )
    assert scalar(url, "SELECT COUNT(*) FROM executions") == OLD + 3

    samples: list[int] = []
    latencies: list[tuple[float, float]] = []  # (when, start-to-result seconds)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append(scalar(url, "SELECT COUNT(*) FROM executions WHERE id >= 'old-'"))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        # Bigger batches and a bigger share of time than the defaults: the suite's time.
        with engine.running_worker(concurrency=4, retention_batch=1000, retention_share=0.25):
            started = time.monotonic()
            n = 0
            # Workflows keep running while it deletes (and a little after).
            while (
                scalar(url, "SELECT COUNT(*) FROM executions WHERE id LIKE 'old-%'") > 2 or n < 20
            ):
                t0 = time.perf_counter()
                assert engine.start(adder, n).result(timeout=30) == n + 2
                latencies.append((time.monotonic() - started, time.perf_counter() - t0))
                n += 1
                assert time.monotonic() - started < 240
            deleting_until = time.monotonic() - started
            for m in range(n, n + 20):
                t0 = time.perf_counter()
                assert engine.start(adder, m).result(timeout=30) == m + 2
                latencies.append((time.monotonic() - started, time.perf_counter() - t0))
    finally:
        done.set()
        sampler.join()
        engine.close()

    # Gone: every expired execution and its steps. Kept: the unfinished and the recent ones.
    remaining = httpx.post(
        f"{url}/db/query?level=strong",
        json=[["SELECT id FROM executions WHERE workflow = 'adder' AND id NOT GLOB '[0-9a-f]*'"]],
    ).json()["results"][0]["values"]
    assert sorted(v[0] for v in remaining) == ["old-pending", "old-running", "recent"]
    assert scalar(url, "SELECT COUNT(*) FROM executions WHERE id LIKE 'old-%'") == 2
    assert scalar(url, "SELECT COUNT(*) FROM steps WHERE execution_id LIKE 'old-%'") == 0
    # In batches of at most 1000, one request each (the holder logs each batch).
    batches = [
        int(r.getMessage().split()[2])
        for r in caplog.records
        if r.getMessage().startswith("retention: deleted")
    ]
    assert sum(batches) == OLD and max(batches) <= 1000 and len(batches) >= OLD // 1000
    drops = [a - b for a, b in itertools.pairwise(samples) if a != b]
    assert len(drops) >= 3, samples  # seen going down while workflows ran
    during = [s for t, s in latencies if t <= deleting_until]
    after = [s for t, s in latencies if t > deleting_until]
    print(
        f"\nretention: {OLD} executions deleted in {deleting_until:.1f}s, "
        f"{len(batches)} batches; "
        f"start->result p50 {statistics.median(during) * 1000:.0f} ms while deleting "
        f"({len(during)} runs), {statistics.median(after) * 1000:.0f} ms after ({len(after)})"
    )


#: Seconds of steady load of the growth test (`make test-retention`: 150); 0 skips it.
GROWTH = float(os.environ.get("RAFTFLOW_RETENTION_GROWTH", "0"))


@pytest.mark.skipif(not GROWTH, reason="opt-in: make test-retention (RAFTFLOW_RETENTION_GROWTH)")
def test_the_database_stops_growing_under_a_steady_load(
    rqlite_cluster_factory: Callable[..., LocalCluster],
) -> None:
    """A steady load with retention=5 s on a fresh 3-node cluster: the leader's SQLite file
    (with its WAL) and its Raft files level off while the executions run keep adding up."""
    from bench.retention import steady_load

    cluster = rqlite_cluster_factory(3)
    samples = steady_load(
        cluster, keep=5.0, duration=GROWTH, sample=10.0, report=lambda row: print(row)
    )
    third = len(samples) // 3
    assert third >= 3, samples
    middle, last = samples[third : 2 * third], samples[2 * third :]
    run = samples[-1]["executions_run"]
    assert run >= 1000, "the load ran too few executions to show anything"
    assert samples[third]["executions_run"] < run / 2  # the load went on all along
    # What is kept is bounded: those of the last retention period and beat.
    assert max(s["kept"] for s in last) < run / 3
    # The database's pages level off (freed pages are reused), and so does its file.
    assert max(s["page_count"] for s in last) <= 1.15 * max(s["page_count"] for s in middle)
    assert max(s["db_bytes"] for s in last) <= 1.15 * max(s["db_bytes"] for s in middle)
    # The WAL rises and falls (rqlite checkpoints it into the file at each snapshot, which
    # a WAL over 4 MiB triggers): bounded, with no trend.
    assert max(s["wal_bytes"] for s in last) <= 2 * max(s["wal_bytes"] for s in middle)

    print(
        f"\nsteady load, retention 5 s: {run} executions in {samples[-1]['t']:.0f}s; "
        + ", ".join(
            f"{s['t']:.0f}s: db {s['db_bytes'] / 2**20:.2f} + wal {s['wal_bytes'] / 2**20:.1f} MiB,"
            f" raft.db "
            f"{s['raft_db_bytes'] / 2**20:.1f} MiB, {s['kept']} kept"
            for s in samples
        )
    )
