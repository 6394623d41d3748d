"""A chaos scenario: a workload on a real rqlite cluster, the faults injected into it, and
its figures.

The workload: several ``raftflow worker tests.apps.ordering:engine`` processes; a producer
thread that starts ``executions`` executions of ``steps`` steps each -- ``initial`` at once,
the rest spread over ``produce_over`` seconds, so new ones arrive while faults happen --
alternating the sync and the async workflow. A monitor thread reads the cluster every
0.1 s (execution progress, steps per worker) and times each fault's recovery: from the
injection until the work the fault stopped moves again (the predicate given with the
fault). The test injects the faults; :meth:`Scenario.finish` waits for every execution,
checks the invariants (:mod:`tests.chaos.invariants`) and prints and saves one summary.

Every process a scenario starts is stopped by :meth:`Scenario.close`, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftflow.errors import RaftflowError
from tests.apps import ordering
from tests.apps.ordering import Spec
from tests.chaos import invariants
from tests.chaos.db import Db, DbError
from tests.chaos.invariants import Started, Tally
from tests.integration.workers import WorkerProcess, rotated_url

APP = "tests.apps.ordering:engine"
FINAL = ("succeeded", "failed", "cancelled")
WORKFLOWS = (ordering.sequence, ordering.asequence)


# --------------------------------------------------------------------------- observations


@dataclass(frozen=True)
class Snapshot:
    """The cluster's progress at one moment (monotonic ``at``)."""

    at: float
    executions: dict[str, tuple[str, int]]  # id -> (status, steps_done)
    by_worker: dict[str, int]  # worker id -> steps recorded

    @property
    def total_steps(self) -> int:
        return sum(done for _, done in self.executions.values())

    @property
    def in_flight(self) -> int:
        return sum(status not in FINAL for status, _ in self.executions.values())

    def progressed(self, baseline: Snapshot, execution_ids: Iterable[str]) -> bool:
        """Each of ``execution_ids`` finished or recorded a step since ``baseline``."""
        for execution_id in execution_ids:
            status, done = self.executions.get(execution_id, ("missing", -1))
            if status not in FINAL and done <= baseline.executions.get(execution_id, ("", 0))[1]:
                return False
        return True


def read_snapshot(db: Db, *, budget: float = 30.0) -> Snapshot:
    rows = db.query(
        "SELECT id, status, (SELECT COUNT(*) FROM steps AS s WHERE s.execution_id = executions.id"
        " AND s.status IN ('succeeded', 'failed')) AS steps_done FROM executions",
        level="weak",
        budget=budget,
    )
    workers = db.query(
        "SELECT worker_id, COUNT(*) AS n FROM steps GROUP BY worker_id", level="weak", budget=budget
    )
    return Snapshot(
        at=time.monotonic(),
        executions={r["id"]: (r["status"], r["steps_done"]) for r in rows},
        by_worker={r["worker_id"]: r["n"] for r in workers},
    )


Recovered = Callable[[Snapshot], bool]


@dataclass
class Fault:
    kind: str
    detail: str
    at: float  # monotonic time of the injection
    recovered: Recovered
    in_flight: int  # executions not finished when it was injected
    held: dict[str, float] = field(default_factory=dict)  # a worker's leases: deadlines
    recovered_at: float | None = None

    @property
    def recovery(self) -> float | None:
        return None if self.recovered_at is None else self.recovered_at - self.at


class Monitor(threading.Thread):
    """Reads progress every ``interval`` seconds and marks faults recovered."""

    def __init__(self, urls: list[str], interval: float = 0.1) -> None:
        super().__init__(name="chaos-monitor", daemon=True)
        self.db = Db(urls, timeout=0.5)
        self.interval = interval
        self.faults: list[Fault] = []
        self.last: Snapshot | None = None
        self._lock = threading.Lock()
        self._halt = threading.Event()

    def add(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)

    def poll(self) -> Snapshot | None:
        try:
            snapshot = read_snapshot(self.db, budget=1.0)
        except (DbError, OSError):
            return None
        with self._lock:
            self.last = snapshot
            for fault in self.faults:
                if fault.recovered_at is None and fault.recovered(snapshot):
                    fault.recovered_at = snapshot.at
        return snapshot

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            self.poll()

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(10)
        self.db.close()


class Producer(threading.Thread):
    """Starts the executions: ``initial`` at once, the rest spread over ``over`` seconds.

    Ids are chosen here, so a start that fails ambiguously is retried with the same id
    (``start`` is idempotent by id) and the set of started executions is exact.
    """

    def __init__(self, prefix: str, specs: list[Spec], initial: int, over: float) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.prefix = prefix
        self.specs = specs
        self.initial = initial
        self.over = over
        self.started: dict[str, Started] = {}
        self.retries = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            begin = time.monotonic()
            later = max(1, len(self.specs) - self.initial)
            for n, spec in enumerate(self.specs):
                if n >= self.initial:
                    due = begin + self.over * (n - self.initial + 1) / later
                    if self._halt.wait(max(0.0, due - time.monotonic())):
                        return
                self._start(f"{self.prefix}-{n:03d}", WORKFLOWS[n % 2], spec)
        except BaseException as exc:
            self.error = exc

    def _start(self, execution_id: str, workflow: Any, spec: Spec) -> None:
        deadline = time.monotonic() + 120
        while True:
            try:
                ordering.engine.start(workflow, spec, execution_id=execution_id)
            except RaftflowError:
                if time.monotonic() > deadline or self._halt.is_set():
                    raise
                self.retries += 1
                time.sleep(0.2)
                continue
            self.started[execution_id] = Started(workflow.__name__, spec)
            return

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(30)


# --------------------------------------------------------------------------- workers


@dataclass
class Worker:
    index: int
    worker_id: str
    url: str
    process: WorkerProcess
    faulted_at: float = float("inf")  # wall-clock time of the fault injected into it

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def alive(self) -> bool:
        return self.process.process.poll() is None

    def output(self) -> str:
        return self.process.output()


def process_state(pid: int) -> str:
    """The state letter of ``/proc/<pid>/stat`` (``T`` stopped), ``""`` when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""


def wait_for(
    predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# --------------------------------------------------------------------------- the scenario


@dataclass
class Options:
    executions: int = 60
    initial: int = 10
    produce_over: float = 6.0
    steps: int = 5
    sleep: float = 0.1
    workers: int = 3
    concurrency: int = 8
    visibility: float = 2.0
    #: extra worker CLI options, e.g. {"timeout": 1.0, "retry_timeout": 10}
    worker_options: dict[str, object] = field(default_factory=dict)
    #: options for the producer's rqlite client (Engine.connect)
    client_options: dict[str, Any] = field(default_factory=dict)


class Scenario:
    #: the app the worker processes run, and the engine the test drives it with
    app = APP
    client: Any = ordering.engine

    def __init__(
        self,
        name: str,
        node_urls: list[str],
        log_dir: Path,
        figures: Path,
        options: Options | None = None,
        *,
        worker_url: Callable[[int], str] | None = None,
        producer_url: str | None = None,
    ) -> None:
        self.name = name
        self.node_urls = list(node_urls)
        self.log_dir = log_dir
        self.figures = figures
        self.options = options or Options()
        self.worker_url = worker_url or (lambda n: rotated_url(self.node_urls, n))
        self.producer_url = producer_url or rotated_url(self.node_urls, 0)
        self.db = Db(self.node_urls)
        self.monitor = Monitor(self.node_urls)
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        o = self.options
        specs = [Spec(log_dir=str(log_dir), steps=o.steps, sleep=o.sleep)] * o.executions
        self.producer = Producer(slug, specs, o.initial, o.produce_over)
        self.workers: list[Worker] = []
        self.excused_pids: set[int] = set()
        self.began = 0.0
        self.completed_at: float | None = None
        self.rng = random.Random()
        self.extra: dict[str, Any] = {}  # more figures for the report

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Scenario:
        """Start the workers, wait until they run, then the producer and the monitor."""
        for _ in range(self.options.workers):
            self.spawn(wait=False)
        for worker in self.workers:
            self.wait_started(worker)
        self.client.connect(self.producer_url, **self.options.client_options)
        self.began = time.monotonic()
        self.producer.start()
        self.monitor.start()
        return self

    def close(self) -> None:
        """Stop everything this scenario started (safe to call twice, after any failure)."""
        with contextlib.suppress(Exception):
            self.producer.stop()
        with contextlib.suppress(Exception):
            self.monitor.stop()
        live = [w for w in self.workers if w.alive()]
        for worker in live:  # signal all first: they drain in parallel
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill(signal.SIGCONT)
                worker.process.kill(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for worker in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.process.process.wait(max(0.1, deadline - time.monotonic()))
        for worker in self.workers:
            worker.process.stop(timeout=5)  # kills what is still running, closes its log
        self.client.close()
        self.db.close()

    def __enter__(self) -> Scenario:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- workers --------------------------------------------------------------------------

    def spawn(self, *, wait: bool = True, **options: object) -> Worker:
        """Start a worker process (``options``: more of its command line's, e.g. ``queue``)."""
        n = len(self.workers)
        worker_id = f"chaos-w{n}"
        url = self.worker_url(n)
        o = self.options
        process = WorkerProcess(
            self.app,
            url,
            self.log_dir / f"worker-{n}.log",
            concurrency=o.concurrency,
            visibility=o.visibility,
            worker_id=worker_id,
            **{**o.worker_options, **options},
        )
        worker = Worker(n, worker_id, url, process)
        self.workers.append(worker)
        if wait:
            self.wait_started(worker)
        return worker

    def wait_started(self, worker: Worker, timeout: float = 30.0) -> None:
        def started() -> bool:
            if not worker.alive():
                raise AssertionError(f"{worker.worker_id} exited:\n{worker.output()[-3000:]}")
            return f"worker {worker.worker_id} started" in worker.output()

        wait_for(started, timeout, f"{worker.worker_id} to start")

    def live_workers(self) -> list[Worker]:
        return [w for w in self.workers if w.alive() and w.pid not in self.excused_pids]

    def holders(self) -> dict[str, dict[str, float]]:
        """Worker id -> {execution: lease deadline} of the events it leases now (strong)."""
        held: dict[str, dict[str, float]] = {}
        for row in self.db.query(
            "SELECT locked_by, group_id, lock_expiry FROM messages "
            "WHERE locked_by IS NOT NULL AND locked_by <> '__parked__'"
        ):
            worker_id = row["locked_by"].rsplit(":", 1)[0]
            held.setdefault(worker_id, {})[row["group_id"]] = row["lock_expiry"]
        return held

    def held_by(self, worker: Worker) -> dict[str, float]:
        return self.holders().get(worker.worker_id, {})

    def assert_no_early_takeover(self, victim: Worker, held: dict[str, float]) -> None:
        """No other worker started a step of an execution ``victim`` held before its lease
        ran out. Deadlines and step start times are both on the cluster's clock (the
        leader's, which on loopback is this machine's); 50 ms allow for its estimate."""
        if not held:
            return
        marks = ", ".join("?" * len(held))
        early = [
            (row, held[row["execution_id"]])
            for row in self.db.query(
                f"SELECT execution_id, idx, worker_id, started_at FROM steps "
                f"WHERE execution_id IN ({marks}) AND worker_id <> ?",
                *held,
                victim.worker_id,
            )
            if held[row["execution_id"]] - 0.05 > row["started_at"] > victim.faulted_at
        ]
        assert not early, f"steps started while {victim.worker_id} still held the lease: {early}"

    def pick_holder(self, timeout: float = 20.0) -> Worker:
        """A random live worker that holds at least one execution now."""

        def find() -> Worker | None:
            held = self.holders()
            candidates = [w for w in self.live_workers() if held.get(w.worker_id)]
            return self.rng.choice(candidates) if candidates else None

        return wait_for(find, timeout, "a worker holding an execution", interval=0.02)

    def kill(self, worker: Worker) -> None:
        """kill -9, and wait until the process is gone; its runs are excused."""
        worker.faulted_at = time.time()
        self.excused_pids.add(worker.pid)
        worker.process.kill(signal.SIGKILL)
        worker.process.process.wait(timeout=10)

    def pause(self, worker: Worker) -> None:
        """SIGSTOP, and wait until the kernel says it is stopped; its runs are excused."""
        worker.faulted_at = time.time()
        self.excused_pids.add(worker.pid)
        worker.process.kill(signal.SIGSTOP)
        wait_for(lambda: process_state(worker.pid) in ("T", "t"), 5, "SIGSTOP to take effect")

    def resume(self, worker: Worker) -> None:
        worker.process.kill(signal.SIGCONT)
        wait_for(lambda: process_state(worker.pid) not in ("T", "t"), 5, "SIGCONT")

    # -- progress and faults --------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        return read_snapshot(self.db)

    def wait_steps(self, count: int, timeout: float = 60.0) -> Snapshot:
        """Wait until at least ``count`` steps are recorded in all."""

        def enough() -> Snapshot | None:
            snapshot = self.monitor.last
            return snapshot if snapshot is not None and snapshot.total_steps >= count else None

        return wait_for(enough, timeout, f"{count} steps to be recorded")

    def fault(
        self,
        kind: str,
        detail: str,
        at: float,
        recovered: Recovered,
        baseline: Snapshot,
        held: dict[str, float] | None = None,
    ) -> Fault:
        """Register a fault injected at ``at``; ``recovered`` is tested on each reading."""
        fault = Fault(kind, detail, at, recovered, baseline.in_flight, dict(held or {}))
        assert fault.in_flight > 0, f"{kind}: injected when no work was left to disturb"
        self.monitor.add(fault)
        return fault

    def wait_recovered(self, fault: Fault, timeout: float = 60.0) -> float:
        wait_for(lambda: fault.recovered_at is not None, timeout, f"recovery from {fault.kind}")
        assert fault.recovery is not None
        return fault.recovery

    # -- the faults ----------------------------------------------------------------------

    def kill_worker(self, victim: Worker) -> Fault:
        """kill -9 ``victim``; over when every execution it held has moved on."""
        at = time.monotonic()
        self.kill(victim)
        time.sleep(0.1)  # a commit the victim had in flight lands (or not) by now
        baseline = self.snapshot()
        held = self.held_by(victim)
        return self.fault(
            "kill -9 worker",
            f"{victim.worker_id} holding {len(held)}",
            at,
            lambda snap: snap.progressed(baseline, held),
            baseline,
            held,
        )

    def stall_worker(self, victim: Worker) -> Fault:
        """SIGSTOP ``victim`` (resume it with :meth:`resume`); over when every execution it
        held has moved on -- which takes its lease lapsing first."""
        at = time.monotonic()
        self.pause(victim)
        time.sleep(0.2)  # a request the victim had in flight is applied (or not) by now
        baseline = self.snapshot()
        held = self.held_by(victim)
        return self.fault(
            "SIGSTOP worker",
            f"{victim.worker_id} holding {len(held)}",
            at,
            lambda snap: snap.progressed(baseline, held),
            baseline,
            held,
        )

    def terminate_worker(self, victim: Worker) -> Fault:
        """SIGTERM ``victim``: it must drain and exit 0 leaving no lease behind; over when
        every execution it held has moved on (at once: nothing is left to lapse)."""
        held = self.held_by(victim)
        baseline = self.snapshot()
        at = time.monotonic()
        victim.process.kill(signal.SIGTERM)
        code = victim.process.process.wait(timeout=30)
        assert code == 0, f"{victim.worker_id} exited {code}:\n{victim.output()[-2000:]}"
        left = self.db.query(
            "SELECT seq, group_id, locked_by FROM messages WHERE substr(locked_by, 1, ?) = ?",
            len(victim.worker_id) + 1,
            victim.worker_id + ":",
        )
        assert left == [], f"{victim.worker_id} exited but still holds {left}"
        return self.fault(
            "SIGTERM worker",
            f"{victim.worker_id} holding {len(held)}",
            at,
            lambda snap: snap.progressed(baseline, held),
            baseline,
            held,
        )

    def cut_link(self, proxy: Any, mode: str, cut: Collection[Worker]) -> Fault:
        """Cut the clients' link to one node (``proxy.set_mode(mode)``); over when each
        worker of ``cut`` (those that entered through it) records a step again."""
        at = time.monotonic()
        proxy.set_mode(mode)
        time.sleep(0.3)  # a commit already forwarded before the cut lands by now
        baseline = self.snapshot()
        ids = [w.worker_id for w in cut]
        return self.fault(
            f"{mode} link",
            f"{proxy.name}, cutting {', '.join(ids) or 'no worker'}",
            at,
            lambda snap: all(snap.by_worker.get(i, 0) > baseline.by_worker.get(i, 0) for i in ids),
            baseline,
        )

    def cluster_fault(self, kind: str, detail: str, inject: Callable[[], None]) -> Fault:
        """Inject a fault of the cluster itself; it is over when any step is recorded again.

        The baseline is read just before ``inject``: a step committed in between would be
        counted as the recovery, but it only becomes visible once the cluster serves
        reads again, so the figure is never shorter than the outage.
        """
        baseline = self.snapshot()
        at = time.monotonic()
        inject()
        return self.fault(
            kind, detail, at, lambda snap: snap.total_steps > baseline.total_steps, baseline
        )

    def wait_caught_up(self, node_url: str, timeout: float = 30.0) -> dict[str, int]:
        """Wait until ``node_url``'s own data (``level=none``) holds what the cluster holds."""
        sql = (
            "SELECT (SELECT COUNT(*) FROM executions) AS executions, "
            "(SELECT COUNT(*) FROM steps) AS steps, (SELECT COUNT(*) FROM messages) AS messages, "
            "(SELECT COUNT(*) FROM executions WHERE status = 'succeeded') AS succeeded"
        )
        cluster = self.db.query(sql)[0]
        seen: dict[str, Any] = {}

        def caught_up() -> bool:
            nonlocal seen
            with contextlib.suppress(DbError, OSError):
                seen = self.db.node_query(node_url, sql, level="none")[0]
            return seen == cluster

        try:
            wait_for(caught_up, timeout, f"{node_url} to catch up", interval=0.2)
        except AssertionError:
            raise AssertionError(f"{node_url} holds {seen}, the cluster {cluster}") from None
        return cluster

    # -- the end --------------------------------------------------------------------------

    def wait_complete(self, timeout: float = 120.0) -> None:
        """Wait until the producer is done and every execution it started has finished."""
        deadline = time.monotonic() + timeout
        self.producer.join(max(0.0, deadline - time.monotonic()))
        if self.producer.is_alive():
            raise AssertionError(f"the producer is still starting executions after {timeout}s")
        if self.producer.error is not None:
            raise AssertionError(f"the producer failed: {self.producer.error!r}")
        ids = set(self.producer.started)

        def done() -> bool:
            # Weak reads can be stale right after a cluster restart (test_stale_reads.py):
            # a row that is missing is not done.
            rows = self.db.query("SELECT id, status FROM executions", level="weak")
            final = {r["id"] for r in rows if r["status"] in FINAL}
            return ids <= final

        try:
            wait_for(done, max(1.0, deadline - time.monotonic()), "every execution", 0.1)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnose()}") from None
        self.completed_at = time.monotonic()
        self.monitor.poll()  # the last reading: faults whose work all finished are recovered

    def diagnose(self) -> str:
        """What is stuck and why: unfinished executions, their messages, worker log tails."""
        lines = ["unfinished executions and their messages:"]
        with contextlib.suppress(DbError):
            for row in self.db.query(
                "SELECT e.id, e.status, (SELECT COUNT(*) FROM steps AS s"
                " WHERE s.execution_id = e.id) AS calls, m.seq, m.locked_by, m.lock_expiry, "
                "m.attempts FROM executions AS e LEFT JOIN messages AS m ON m.group_id = e.id "
                "WHERE e.status NOT IN ('succeeded', 'failed', 'cancelled')"
            ):
                lines.append(f"  {row}")
        for worker in self.workers:
            state = "alive" if worker.alive() else f"exit {worker.process.process.returncode}"
            tail = "\n    ".join(worker.output().splitlines()[-8:])
            lines.append(f"--- {worker.worker_id} pid {worker.pid} ({state}):\n    {tail}")
        return "\n".join(lines)

    def finish(self, timeout: float = 120.0) -> dict[str, Any]:
        """Wait for the workload, check every invariant, print and save the figures."""
        self.wait_complete(timeout)
        fenced = self.fenced()
        tally = invariants.check(
            self.db,
            self.producer.started,
            self.log_dir,
            worker_pids={w.worker_id: w.pid for w in self.workers},
            excused_pids=self.excused_pids,
            fenced=fenced,
        )
        return self.report(tally, len(fenced))

    def fenced(self) -> set[tuple[int, str]]:
        """(pid, execution) of the runs whose commit or lease their worker was refused: a
        run overlapping another is excused then, since fencing is what kept it out."""
        return {
            (w.pid, execution_id)
            for w in self.workers
            for execution_id in invariants.fenced_executions(w.log_path)
        }

    def report(self, tally: Tally, fenced: int) -> dict[str, Any]:
        assert self.completed_at is not None
        faults = self.monitor.faults
        recoveries = [f.recovery for f in faults if f.recovery is not None]
        last_fault = max((f.at for f in faults), default=self.began)
        figures = {
            "scenario": self.name,
            "executions": tally.executions,
            "steps": tally.steps,
            "step_runs": tally.step_runs,
            "step_reruns": tally.reruns,
            "excused_runs": tally.excused_runs,
            "fenced_executions": fenced,
            "faults": len(faults),
            "fault_list": [
                {
                    "kind": f.kind,
                    "detail": f.detail,
                    "at": round(f.at - self.began, 3),
                    "in_flight": f.in_flight,
                    "recovery": None if f.recovery is None else round(f.recovery, 3),
                }
                for f in faults
            ],
            "recovery_max": round(max(recoveries), 3) if recoveries else None,
            "recovery_median": round(statistics.median(recoveries), 3) if recoveries else None,
            "completion_after_last_fault": round(self.completed_at - last_fault, 3),
            "duration": round(self.completed_at - self.began, 3),
            "workers_started": len(self.workers),
            "start_retries": self.producer.retries,
            "lost": 0,  # check() passed: every execution finished correctly
            **self.extra,
        }
        print("\n" + summary_line(figures), flush=True)
        append_figures(self.figures, figures)
        return figures


def summary_line(f: dict[str, Any]) -> str:
    def seconds(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.2f}s"

    return (
        f"CHAOS {f['scenario']}: {f['executions']} executions, {f['steps']} steps, "
        f"{f['step_reruns']} step re-runs, {f['faults']} faults, "
        f"recovery max {seconds(f['recovery_max'])} (median {seconds(f['recovery_median'])}), "
        f"done {seconds(f['completion_after_last_fault'])} after the last fault, "
        f"{f['duration']:.1f}s in all, lost 0"
    )


_figures_lock = threading.Lock()


def append_figures(path: Path, figures: dict[str, Any]) -> None:
    """Add one scenario's figures to the JSON list in ``path``."""
    with _figures_lock:
        existing = json.loads(path.read_text()) if path.exists() else []
        existing.append(figures)
        path.write_text(json.dumps(existing, indent=2) + "\n")
