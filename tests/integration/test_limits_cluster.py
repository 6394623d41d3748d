"""Concurrency limits on a real 3-node rqlite cluster with real worker processes.

Workers are ``raftflow worker tests.apps.limits:engine`` processes, each entering the cluster
through a different node. How many executions hold a lease at once is sampled from the
database (not from logs) while they run; the step logs add when and where each step ran.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, Status
from tests.apps import limits
from tests.apps.limits import Job, peak_overlap, runs
from tests.integration.workers import rotated_url, workers
from tests.support import wait_until

APP = "tests.apps.limits:engine"

pytestmark = pytest.mark.slow

#: Executions of a workflow whose event a worker leases now (parked ones hold no lease).
LEASES = """
SELECT COUNT(*) AS leases FROM messages AS m JOIN executions AS e ON e.id = m.group_id
WHERE e.workflow = :workflow AND m.locked_by IS NOT NULL AND m.locked_by <> '__parked__'
  AND m.lock_expiry >= :now
"""


@pytest.fixture
def engine(cluster: LocalCluster) -> Iterator[Engine]:
    limits.engine.connect(rotated_url(cluster.urls, 0))
    yield limits.engine
    limits.engine.close()


def weak_rows(engine: Engine, sql: str, **params: Any) -> list[dict[str, Any]]:
    """A weak read: answered by the leader, no Raft entry (a strong read would be one)."""

    def flow() -> Any:
        response = yield Request((Statement("test.read", sql, params),), level="weak")
        return response.raise_for_errors()[0].dicts()

    return engine.store.run(flow())


class LeaseSampler:
    """Samples, in a thread, how many executions of ``workflow`` hold a lease at once."""

    def __init__(self, engine: Engine, workflow: str) -> None:
        self.engine, self.workflow = engine, workflow
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rows = weak_rows(self.engine, LEASES, workflow=self.workflow, now=time.time())
            self.samples.append(int(rows[0]["leases"]))
            time.sleep(0.01)

    def __enter__(self) -> LeaseSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.parametrize(
    "workflow", ["capped", pytest.param("acapped", marks=pytest.mark.extended)]
)
def test_a_limit_of_2_across_3_workers_of_8_never_shows_3_leases(
    engine: Engine, cluster: LocalCluster, tmp_path: Path, workflow: str
) -> None:
    jobs = [Job(log_dir=str(tmp_path), n=i, work=0.15) for i in range(16)]
    with (
        workers(APP, cluster.urls, 3, tmp_path / "logs", concurrency=8),
        LeaseSampler(engine, workflow) as sampler,
    ):
        handles = [engine.start(workflow, job) for job in jobs]
        results = [handle.result(timeout=120) for handle in handles]
    assert results == list(range(16))
    assert len(sampler.samples) > 100
    assert max(sampler.samples) == 2, sampler.samples  # reached, never passed
    lines = runs(str(tmp_path))
    assert peak_overlap(lines) == 2
    assert len({line["pid"] for line in lines}) >= 2  # the slots moved between processes
    firsts = [line["n"] for line in lines if line["event"] == "start" and line["step"] == 0]
    # FIFO admission: two slots, so an execution starts at most one place out of order.
    assert sorted(firsts) == list(range(16))
    assert all(abs(n - i) <= 1 for i, n in enumerate(firsts)), firsts


@pytest.mark.parametrize(
    "workflow", ["per_customer", pytest.param("aper_customer", marks=pytest.mark.extended)]
)
def test_one_at_a_time_per_key_in_start_order_across_processes(
    engine: Engine, cluster: LocalCluster, tmp_path: Path, workflow: str
) -> None:
    jobs = [Job(log_dir=str(tmp_path), customer=c, n=i, work=0.05) for i in range(6) for c in "ab"]
    with (
        workers(APP, cluster.urls, 3, tmp_path / "logs", concurrency=4),
        LeaseSampler(engine, workflow) as sampler,
    ):
        handles = [engine.start(workflow, job) for job in jobs]
        for handle in handles:
            handle.result(timeout=120)
    lines = runs(str(tmp_path))
    for customer in "ab":
        mine = [line for line in lines if line["customer"] == customer]
        assert peak_overlap(mine) == 1
        firsts = [line["n"] for line in mine if line["event"] == "start" and line["step"] == 0]
        assert firsts == list(range(6))  # FIFO within the key
    assert max(sampler.samples) <= 2  # one per key


def raft_applied_index(cluster: LocalCluster) -> int:
    for node in cluster.nodes:
        raft = httpx.get(node.url + "/status", timeout=5).json()["store"]["raft"]
        if raft["state"] == "Leader":
            return int(raft["applied_index"])
    raise AssertionError("no leader")


def test_waiting_executions_cost_no_raft_entry(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    first = engine.start(limits.holder, "go")
    waiting = [engine.start(limits.holder, "go") for _ in range(20)]
    with workers(APP, cluster.urls, 2, tmp_path / "logs", concurrency=8):
        wait_until(  # the holder runs, parked in its recv; the 20 others wait for its slot
            lambda: (
                weak_rows(engine, "SELECT status FROM steps WHERE execution_id = :id", id=first.id)
                == [{"status": "waiting"}]
            ),
            timeout=30,
        )
        time.sleep(1.0)
        before = raft_applied_index(cluster)
        time.sleep(5.0)
        entries = raft_applied_index(cluster) - before
        statuses = {engine.store.get(h.id).status for h in waiting}  # type: ignore[union-attr]
        # 2 idle workers and 21 waiting executions over 5 s: at most the workers' presence
        # beats (one entry per worker per 10 s); the waiting executions add none.
        print(f"Raft entries in 5 s with 21 executions waiting: {entries}")
        assert entries <= 2, entries
        assert statuses == {Status.PENDING}
        engine.send(first.id, "done", topic="go")
        assert first.result(timeout=30) == "done"
        for handle in waiting:
            engine.send(handle.id, handle.id, topic="go")
        assert [h.result(timeout=60) for h in waiting] == [h.id for h in waiting]


def test_a_worker_killed_in_a_slot_gives_it_up_at_lease_expiry(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    """The slot belongs to the execution: when its worker dies the others keep waiting, the
    lease lapses, and another worker takes the execution over -- then the rest run."""
    visibility = 4.0
    jobs = [Job(log_dir=str(tmp_path), customer="k", n=i, work=1.5) for i in range(3)]
    with (
        workers(
            APP, cluster.urls, 2, tmp_path / "logs", concurrency=4, visibility=visibility
        ) as procs,
        LeaseSampler(engine, "per_customer") as sampler,
    ):
        handles = [engine.start(limits.per_customer, job) for job in jobs]
        started = wait_until(
            lambda: [line for line in runs(str(tmp_path)) if line["event"] == "start"],
            timeout=30,
        )[0]
        victim = next(p for p in procs if p.pid == started["pid"])
        victim.kill(signal.SIGKILL)
        killed_at = time.time()
        results = [handle.result(timeout=60) for handle in handles]
    assert results == [0, 1, 2]
    assert max(sampler.samples) == 1, sampler.samples
    lines = runs(str(tmp_path))
    # The killed execution went on elsewhere after its lease lapsed, before the others ran.
    resumed = [
        line
        for line in lines
        if line["execution"] == started["execution"]
        and line["event"] == "start"
        and line["pid"] != victim.pid
    ]
    assert resumed, lines
    assert resumed[0]["at"] >= killed_at + visibility - 1.5  # not before the lease lapsed
    print(f"resumed {resumed[0]['at'] - killed_at - visibility:.2f} s after the lease lapsed")
    others = [line for line in lines if line["execution"] != started["execution"]]
    assert all(line["at"] > resumed[0]["at"] for line in others)  # they waited for the slot
    assert [line["n"] for line in others if line["event"] == "start" and line["step"] == 0] == [
        1,
        2,
    ]


@pytest.mark.parametrize(
    "workflow, calls", [("rated", 130), pytest.param("arated", 30, marks=pytest.mark.extended)]
)
def test_a_rate_limit_holds_across_processes(
    engine: Engine, cluster: LocalCluster, tmp_path: Path, workflow: str, calls: int
) -> None:
    """10 starts per second across 3 workers of concurrency 8: the reserved start times
    never exceed it in any second, each step starts at or after its own, no 10 s of actual
    starts exceed it by more than 10%, and the rate over the sync run (13 s) is within 10%
    of 10 per second."""
    jobs = [Job(log_dir=str(tmp_path), customer="k", n=i) for i in range(calls)]
    # Reservations older than the window plus a minute are pruned by later ones: on a loaded
    # machine the run can outlast that, so the table is sampled while it runs.
    seen: dict[str, float] = {}
    done = threading.Event()

    def sample() -> None:
        while True:
            last = done.is_set()
            for row in weak_rows(engine, "SELECT token, at FROM rate_slots"):
                seen[row["token"]] = row["at"]
            if last:
                return
            done.wait(2.0)

    sampler = threading.Thread(target=sample)
    with workers(APP, cluster.urls, 3, tmp_path / "logs", concurrency=8):
        sampler.start()
        try:
            handles = [engine.start(workflow, job) for job in jobs]
            assert [h.result(timeout=120) for h in handles] == list(range(calls))
        finally:
            done.set()
            sampler.join()
    reserved = [{"token": t, "at": at} for t, at in sorted(seen.items(), key=lambda r: r[1])]
    slots = {":".join(row["token"].split(":")[:3]): row["at"] for row in reserved}  # the last
    starts = {
        f"{line['execution']}:{line['step']}:{line['attempt']}": line["at"]
        for line in runs(str(tmp_path))
    }
    assert slots.keys() == starts.keys() and len(slots) == calls
    assert most_in_a_window([row["at"] for row in reserved], 1.0) <= 10
    # Each step starts at or after its reserved time -- as the cluster clock of the worker
    # that runs it says, which agrees with the machine's to half a round trip of its last
    # clock sync (slow while three workers start on two cores).
    early = max(at - starts[token] for token, at in slots.items())
    span = max(starts.values()) - min(starts.values())
    rate = (calls - 10) / span  # the first 10 go at once, then 10 per second
    print(
        f"{workflow}: {calls} starts in {span:.2f} s, {rate:.2f}/s after the first burst, "
        f"earliest start {early:.3f} s before its reserved time"
    )
    in_a_second = most_in_a_window(list(starts.values()), 1.0)
    in_10_seconds = most_in_a_window(list(starts.values()), 10.0)
    print(
        f"most starts in 1 s: {in_a_second}, in 10 s: {in_10_seconds}; "
        f"{len(reserved) - calls} reservations given up by late starts"
    )
    # A start later than a period past its reserved time reserves again: late starts
    # bunch up with at most one period's others -- the limit holds within one period.
    assert in_10_seconds <= 110  # within 10% over 10 s
    assert rate <= 11.0, rate
    # How much of the limit is used is the machine's (about 10 per second when quiet,
    # 6 seen on 2 loaded cores): printed above, never asserted.
    assert len({line["pid"] for line in runs(str(tmp_path))}) >= 2


def most_in_a_window(times: list[float], window: float) -> int:
    times = sorted(times)
    return max(sum(1 for u in times[i:] if u < t + window - 1e-9) for i, t in enumerate(times))


@pytest.mark.parametrize(
    "workflow", ["debounced", pytest.param("adebounced", marks=pytest.mark.extended)]
)
def test_debounce_folds_50_starts_into_one_run(
    engine: Engine, cluster: LocalCluster, tmp_path: Path, workflow: str
) -> None:
    with workers(APP, cluster.urls, 2, tmp_path / "logs", concurrency=4):
        handles = [
            engine.start(
                workflow, Job(log_dir=str(tmp_path), n=i), execution_id="sync-42", debounce=1.0
            )
            for i in range(50)
        ]
        last_start = time.time()
        assert [h.created for h in handles] == [True] + [False] * 49
        assert handles[0].result(timeout=30) == 49
    lines = runs(str(tmp_path))
    assert [line["run"] for line in lines] == [49]  # one run, with the last input
    assert lines[0]["at"] >= last_start + 1.0 - 0.1  # a debounce after the last start


def test_what_limits_cost_in_raft_entries(
    engine: Engine, cluster: LocalCluster, tmp_path: Path
) -> None:
    """The Raft entries of each action, limited and not (one worker in this process; the
    figures are in docs/performance.md)."""
    n = 20
    costs: dict[str, float] = {}

    def entries(label: str, action: Any) -> None:
        before = raft_applied_index(cluster)
        action()
        costs[label] = (raft_applied_index(cluster) - before) / n

    def run_all(workflow: str, concurrency: int = 8) -> None:
        jobs = [Job(log_dir=str(tmp_path), n=i, work=0.0) for i in range(n)]
        handles: list[Any] = []
        entries(
            f"start {workflow}", lambda: handles.extend(engine.start(workflow, j) for j in jobs)
        )
        claims: list[int] = []

        def run() -> None:
            with engine.running_worker(concurrency=concurrency) as worker:
                for handle in handles:
                    handle.result(timeout=60)
                claims.append(worker.stats.claims)

        label = f"{workflow} (worker concurrency {concurrency})"
        entries(f"run {label}", run)  # with the worker's start and stop (its presence)
        costs[f"claims {label}"] = claims[0] / n

    for workflow in ("uncapped", "capped", "unrated", "rated"):
        run_all(workflow)
    run_all("uncapped", concurrency=2)  # as many at once as the limit lets run
    job = Job(log_dir=str(tmp_path), n=0)
    entries(
        "debounced start",
        lambda: [engine.start("debounced", job, execution_id="d", debounce=60) for _ in range(n)],
    )
    for label, value in costs.items():
        print(f"COST {label}: {value:.2f} per execution")
    assert costs["start uncapped"] == costs["start capped"] == 1.0  # the gate: same statement
    assert costs["debounced start"] == 1.0  # a fold is the start's one statement
    # A limited execution costs what an unlimited one does when as many run at once (its
    # admission rides on the commit that finishes the one before it); fewer at once
    # batch less than 8 would.
    capped = costs["run capped (worker concurrency 8)"]
    assert capped <= costs["run uncapped (worker concurrency 2)"] + 0.5
    rated = costs["run rated (worker concurrency 8)"]
    assert rated <= costs["run unrated (worker concurrency 8)"] + 3.0  # reserve, park, claim
