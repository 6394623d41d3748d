"""The durable primitives under chaos: executions that sleep, receive messages, start and
wait for children, retry a failing step and are cancelled, while workers are killed with
``kill -9`` and the rqlite leader is killed, on a dedicated 3-node cluster.

The workload (``tests.apps.mixed``, three workers of concurrency 8, more started as they
die): nappers (sync and async) sleeping 1-4 s, listeners (sync and async) receiving 3
messages each that the test sends at random moments (faults included; retried sends carry
a key), parents waiting for 2 sleeping children, retried steps failing 1-2 times, and
cancel targets (a parent whose children sleep 10 minutes, a listener whose message never
comes, a 10-minute sleep) cancelled mid-run.

Invariants on top of the usual ones: every execution ends as its kind says (nothing lost,
no wait left unresolved, the cancelled ones and their children cancelled); each attempt of
a step runs once as its own log says (but for the re-runs of workers killed, stalled or
refused); no completed step runs again (the run a record came from is the last run of
that step); no timer fires early (a sleeper's next step starts no earlier than its
recorded wake time, a retry attempt no earlier than the previous one's end plus its
delay); a retried step resumes at the right attempt; every message is received exactly
once and in send order.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow.errors import ExecutionFinishedError, RaftflowError, WorkflowCancelledError
from tests.apps import mixed, ordering
from tests.apps.mixed import Job
from tests.chaos.invariants import Tally, runs_beyond_one
from tests.chaos.scenario import FINAL, Options, Producer, Scenario, wait_for

pytestmark = pytest.mark.chaos

ClusterFactory = Callable[..., LocalCluster]

CLIENT_TIMEOUTS = {"timeout": 1.0, "retry_timeout": 15.0}
LONG = 600.0  # the cancel targets' waits: they only end by the cancel
EARLY_SLACK = 0.05  # clock estimate between a worker's time.time() and the recorded times


@dataclass(frozen=True)
class Planned:
    execution_id: str
    workflow: Any
    job: Job
    cancel: bool = False


def plan(log_dir: str, rng: random.Random) -> list[Planned]:
    """The executions of the workload, cancel targets first."""
    jobs: list[Planned] = []

    def add(kind: str, workflow: Any, job: Job, cancel: bool = False) -> None:
        jobs.append(Planned(f"prim-{kind}-{len(jobs):03d}", workflow, job, cancel))

    base = Job(log_dir=log_dir)
    for _ in range(2):
        add(
            "cancel",
            mixed.parent,
            base.model_copy(update={"children": 2, "child_sleep": LONG}),
            True,
        )
        add("cancel", mixed.listener, base.model_copy(update={"messages": 1}), True)
        add("cancel", mixed.napper, base.model_copy(update={"sleep": LONG}), True)
    rest: list[tuple[str, Any, Job]] = []
    for n in range(16):
        job = base.model_copy(update={"sleep": round(rng.uniform(1.0, 4.0), 2)})
        rest.append(("nap", (mixed.napper, mixed.anapper)[n % 2], job))
    for n in range(10):
        job = base.model_copy(update={"messages": 3})
        rest.append(("recv", (mixed.listener, mixed.alistener)[n % 2], job))
    for _ in range(6):
        job = base.model_copy(update={"children": 2, "child_sleep": round(rng.uniform(1, 3), 2)})
        rest.append(("parent", mixed.parent, job))
    for n in range(10):
        rest.append(("retry", mixed.flaky, base.model_copy(update={"fail_times": 1 + n % 2})))
    rng.shuffle(rest)
    for kind, workflow, job in rest:
        add(kind, workflow, job)
    return jobs


class MixProducer(Producer):
    """Starts the planned executions through ``tests.apps.mixed``'s engine."""

    def __init__(self, planned: list[Planned], initial: int, over: float) -> None:
        super().__init__("prim", [], initial, over)
        self.planned = planned
        self.started_at: dict[str, float] = {}

    def run(self) -> None:
        try:
            begin = time.monotonic()
            later = max(1, len(self.planned) - self.initial)
            for n, item in enumerate(self.planned):
                if n >= self.initial:
                    due = begin + self.over * (n - self.initial + 1) / later
                    if self._halt.wait(max(0.0, due - time.monotonic())):
                        return
                self._start_job(item)
        except BaseException as exc:
            self.error = exc

    def _start_job(self, item: Planned) -> None:
        deadline = time.monotonic() + 120
        while True:
            try:
                mixed.engine.start(item.workflow, item.job, execution_id=item.execution_id)
            except RaftflowError:
                if time.monotonic() > deadline or self._halt.is_set():
                    raise
                self.retries += 1
                time.sleep(0.2)
                continue
            self.started_at[item.execution_id] = time.monotonic()
            self.started[item.execution_id] = item  # type: ignore[assignment]
            return


class Sender(threading.Thread):
    """Sends each listener (not the cancel targets) its messages 0, 1, 2 in order, at
    random moments 0.3-4 s apart after its start; a send that fails is retried with the
    same key (idempotent)."""

    def __init__(self, producer: MixProducer, listeners: list[Planned], seed: int) -> None:
        super().__init__(name="chaos-sender", daemon=True)
        self.producer = producer
        self.rng = random.Random(seed)
        self.queue = sorted(
            (self.rng.uniform(0.3, 4.0) * (i + 1), item.execution_id, i)
            for item in listeners
            for i in range(item.job.messages)
        )
        self.sent = 0
        self.retries = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            pending = list(self.queue)
            while pending and not self._halt.is_set():
                ready = [
                    p
                    for p in pending
                    if p[1] in self.producer.started_at
                    and time.monotonic() >= self.producer.started_at[p[1]] + p[0]
                    # in order: message i only after message i - 1 of the same listener
                    and not any(q[1] == p[1] and q[2] < p[2] for q in pending)
                ]
                for item in ready:
                    self._send(item[1], item[2])
                    pending.remove(item)
                self._halt.wait(0.05)
        except BaseException as exc:
            self.error = exc

    def _send(self, execution_id: str, n: int) -> None:
        deadline = time.monotonic() + 120
        first = True
        while True:
            try:
                mixed.engine.send(execution_id, n, topic="go", key=f"m{n}")
                self.sent += 1
                return
            except ExecutionFinishedError:
                if first:
                    raise
                self.sent += 1  # an earlier try landed and was the last message received
                return
            except RaftflowError:
                if time.monotonic() > deadline or self._halt.is_set():
                    raise
                first = False
                self.retries += 1
                time.sleep(0.2)

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(30)


class PrimitivesScenario(Scenario):
    app = "tests.apps.mixed:engine"
    client = mixed.engine

    def __init__(self, *args: Any, seed: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rng = random.Random(seed)
        self.planned = plan(str(self.log_dir), self.rng)
        o = self.options
        self.producer = MixProducer(self.planned, o.initial, o.produce_over)
        listeners = [p for p in self.planned if p.job.messages and not p.cancel]
        self.sender = Sender(self.producer, listeners, seed)
        self.cancelled: dict[str, float] = {}

    def start(self) -> Scenario:
        super().start()
        self.sender.start()
        return self

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.sender.stop()
        super().close()

    def cancel_targets(self, timeout: float = 60.0) -> None:
        """Once every cancel target waits (asleep, on a recv, on its children), cancel it."""
        targets = [p.execution_id for p in self.planned if p.cancel]
        marks = ", ".join("?" * len(targets))

        def waiting() -> bool:
            rows = self.db.query(
                f"SELECT DISTINCT execution_id FROM steps WHERE execution_id IN ({marks}) "
                "AND kind IN ('sleep', 'recv', 'wait')",
                *targets,
                level="weak",
            )
            return len(rows) == len(targets)

        wait_for(waiting, timeout, "every cancel target to wait", interval=0.1)
        for execution_id in targets:
            deadline = time.monotonic() + 60
            while True:
                try:
                    mixed.engine.cancel(execution_id)
                    break
                except RaftflowError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            self.cancelled[execution_id] = time.time()

    def finish(self, timeout: float = 120.0) -> dict[str, Any]:
        self.sender.join(max(1.0, timeout / 2))
        if self.sender.is_alive() or self.sender.error is not None:
            raise AssertionError(f"the sender did not finish: {self.sender.error!r}")
        self.wait_complete(timeout)

        def all_final() -> bool:  # the children too
            rows = self.db.query("SELECT status FROM executions", level="weak")
            return all(r["status"] in FINAL for r in rows)

        wait_for(all_final, 30, "every child to finish")
        tally = check_primitives(self)
        for handle_id in list(self.cancelled)[:1]:  # result() of a cancelled one raises
            with pytest.raises(WorkflowCancelledError):
                mixed.engine.get(handle_id).result(timeout=10)
        self.extra.update(sender_retries=self.sender.retries, messages=self.sender.sent)
        return self.report(tally, len(self.fenced()))


def check_primitives(s: PrimitivesScenario) -> Tally:
    """Every invariant of the module docstring; one AssertionError listing every violation."""
    problems: list[str] = []
    planned = {p.execution_id: p for p in s.planned}
    started = set(s.producer.started)
    rows = {r["id"]: r for r in s.db.query("SELECT * FROM executions")}
    steps = s.db.query("SELECT * FROM steps ORDER BY execution_id, idx")
    records: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for step in steps:
        records[step["execution_id"]][step["idx"]] = step
    runs: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    by_execution: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in mixed.read_runs(str(s.log_dir)):
        runs[(run["execution"], run["index"])].append(run)
        by_execution[run["execution"]].append(run)
    pids = {w.worker_id: w.pid for w in s.workers}

    # Nothing lost, nothing extra; each ends as its kind says; children with their parent.
    assert started == set(planned), "the producer did not start every planned execution"
    children: dict[str, list[str]] = defaultdict(list)
    for execution_id, row in rows.items():
        if row["parent_id"] is not None:
            children[row["parent_id"]].append(execution_id)
        elif execution_id not in planned:
            problems.append(f"execution {execution_id} exists but was never started")
    expected_status: dict[str, tuple[str, Any]] = {}
    for execution_id, item in planned.items():
        if item.cancel:
            expected_status[execution_id] = ("cancelled", None)
            for child in children[execution_id]:
                expected_status[child] = ("cancelled", None)
            if len(children[execution_id]) != item.job.children:
                problems.append(f"{execution_id}: children {children[execution_id]}")
        else:
            expected_status[execution_id] = (
                "succeeded",
                mixed.expected(item.workflow.__name__, item.job),
            )
            for child in children[execution_id]:
                expected_status[child] = ("succeeded", "after")
            if sorted(children[execution_id]) != [
                f"{execution_id}/{i}" for i in range(1, 1 + item.job.children)
            ]:
                problems.append(f"{execution_id}: children {children[execution_id]}")
    for execution_id, (status, output) in expected_status.items():
        found = rows.get(execution_id)
        if found is None:
            problems.append(f"execution {execution_id} was started but does not exist")
            continue
        row = found
        got = None if row["output"] is None else json.loads(row["output"])
        if row["status"] != status or (status == "succeeded" and got != output):
            problems.append(
                f"execution {execution_id}: {row['status']} with {got!r}, expected {status} "
                f"with {output!r}; error: {row['error']}"
            )

    # Each attempt of a step ran once as its code saw it (but for the re-runs of workers
    # killed, stalled, fenced or handing the execution back); no completed step ran again;
    # runs in order, never overlapping (but for those workers' runs); the record's run exists.
    fenced = s.fenced()
    for execution_id, execution_runs in by_execution.items():
        problems += runs_beyond_one(
            execution_id,
            [r for r in execution_runs if r["pid"] not in s.excused_pids],
            fenced,
            key=("index", "attempt"),
        )
    reruns = 0
    for execution_id, by_idx in records.items():
        for idx, record in by_idx.items():
            if record["kind"] != "step" or record["status"] != "succeeded":
                continue
            its_runs = runs.get((execution_id, idx), [])
            pid = pids.get(record["worker_id"])
            if not its_runs or its_runs[-1]["pid"] != pid:
                problems.append(
                    f"step {execution_id}/{idx} recorded by {record['worker_id']} (pid {pid}): "
                    f"its runs {[(r['pid'], r['attempt']) for r in its_runs]} -- a completed "
                    "step ran again, or the recorded run is missing"
                )
            reruns += len(its_runs) - len({r["attempt"] for r in its_runs})
    for execution_id, execution_runs in by_execution.items():
        counted = [
            r
            for r in execution_runs
            if r["pid"] not in s.excused_pids and (r["pid"], execution_id) not in fenced
        ]
        indexes = [r["index"] for r in counted]
        if indexes != sorted(indexes):
            problems.append(f"execution {execution_id}: runs out of order: {indexes}")
        try:
            ordering.assert_serial(counted)
        except AssertionError as exc:
            problems.append(f"execution {execution_id}: {exc}")

    # No timer fired early: a sleeper's "after" starts at or after its wake time.
    lateness: list[float] = []
    sleepers = [e for e, (status, output) in expected_status.items() if output == "after"]
    for execution_id in sleepers:
        wakes = [r["wake_at"] for r in records[execution_id].values() if r["kind"] == "sleep"]
        afters = [r for r in by_execution[execution_id] if r["label"] == "after"]
        if len(wakes) != 1 or not afters:
            problems.append(f"{execution_id}: sleep records {wakes}, after-runs {afters}")
            continue
        first = min(r["start"] for r in afters)
        if first < wakes[0] - EARLY_SLACK:
            problems.append(f"{execution_id}: woke {wakes[0] - first:.3f}s early")
        lateness.append(first - wakes[0])

    # A retried step resumes at the right attempt, each after the previous plus the delay.
    for execution_id, item in planned.items():
        if item.workflow is not mixed.flaky:
            continue
        attempts = [r for r in by_execution[execution_id] if r["label"].startswith("attempt")]
        numbers = [r["attempt"] for r in attempts]
        if numbers != sorted(numbers) or set(numbers) != set(range(1, item.job.fail_times + 2)):
            problems.append(f"{execution_id}: attempts ran {numbers}")
        for before, after in itertools.pairwise(attempts):
            if after["attempt"] > before["attempt"] and (
                after["start"] < before["end"] + mixed.RETRY_DELAY - EARLY_SLACK
            ):
                problems.append(f"{execution_id}: attempt {after['attempt']} came early")

    # Every message received exactly once, in send order (the outputs above), none left.
    for row in s.db.query(
        "SELECT execution_id, COUNT(*) AS n, SUM(consumed_idx IS NULL) AS unread "
        "FROM signals GROUP BY execution_id"
    ):
        target = planned.get(row["execution_id"])
        if target is None or target.cancel or row["n"] != target.job.messages or row["unread"]:
            problems.append(f"signals of {row['execution_id']}: {row}")

    # The cancelled ones went no further.
    for execution_id, (status, _) in expected_status.items():
        if status == "cancelled" and any(r["label"] == "after" for r in by_execution[execution_id]):
            problems.append(f"{execution_id} was cancelled but ran its last step")

    # The queue is empty, no orphans.
    for message in s.db.query("SELECT * FROM messages"):
        problems.append(f"message left in the queue: {message}")
    for group in s.db.query(
        "SELECT group_id FROM groups WHERE group_id NOT IN (SELECT group_id FROM messages)"
    ):
        problems.append(f"groups row without messages: {group['group_id']}")
    for orphan in set(records) - set(rows):
        problems.append(f"steps of execution {orphan}, which does not exist")

    if problems:
        shown = "\n  ".join(problems[:30])
        more = f"\n  ... and {len(problems) - 30} more" if len(problems) > 30 else ""
        raise AssertionError(f"{len(problems)} invariant violations:\n  {shown}{more}")
    s.extra.update(
        sleeps=len(lateness),
        wake_lateness_p50=round(statistics.median(lateness), 3),
        wake_lateness_max=round(max(lateness), 3),
        children=sum(len(c) for c in children.values()),
        cancelled=sum(1 for status, _ in expected_status.values() if status == "cancelled"),
        retried=sum(1 for p in planned.values() if p.workflow is mixed.flaky),
    )
    all_runs = sum(len(r) for r in runs.values())
    return Tally(
        executions=len(rows),
        steps=len(steps),
        step_runs=all_runs,
        reruns=reruns,
        excused_runs=sum(
            1
            for (execution_id, _), rs in runs.items()
            for r in rs
            if r["pid"] in s.excused_pids or (r["pid"], execution_id) in fenced
        ),
    )


def test_primitives_under_worker_and_leader_kills(
    tmp_path: Path, figures_path: Path, rqlite_cluster_factory: ClusterFactory
) -> None:
    cluster = rqlite_cluster_factory(3)
    seed = random.randrange(1 << 30)
    print(f"\nseed {seed}")
    options = Options(
        initial=20,
        produce_over=6.0,
        visibility=3.0,
        worker_options=dict(CLIENT_TIMEOUTS),
        client_options=CLIENT_TIMEOUTS,
    )
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    s = PrimitivesScenario("primitives", cluster.urls, log_dir, figures_path, options, seed=seed)
    with s:
        # 1. a worker holding executions dies; another takes its place
        s.wait_steps(15)
        killed = [s.pick_holder()]
        first = s.kill_worker(killed[0])
        s.spawn(wait=False)

        # 2. the leader dies; it comes back once the work moved on
        leader = cluster.leader()
        fault = s.cluster_fault("kill -9 leader", leader.node_id, lambda: cluster.kill(leader))
        s.wait_recovered(fault)
        cluster.start_node(leader)

        # 3. the cancel targets, all waiting, are cancelled; another worker dies
        s.cancel_targets()
        killed.append(s.pick_holder())
        second = s.kill_worker(killed[-1])
        s.spawn(wait=False)
        cluster.wait_ready()

        figures = s.finish(timeout=120)
        for victim, kill in zip(killed, (first, second)):
            s.assert_no_early_takeover(victim, kill.held)
        for node in cluster.nodes:
            s.wait_caught_up(node.url)
    assert figures["faults"] == 3
    assert figures["cancelled"] == 6 + 4
    assert figures["sleeps"] == 16 + 12
