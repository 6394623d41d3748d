"""Prometheus metrics of a worker, from its lifecycle hooks (``raftflow worker
--metrics-port 9464``, or ``engine.add_hooks(Metrics())`` and ``metrics.serve(9464)``).

=========================================  =====================================================
metric                                     what
=========================================  =====================================================
raftflow_steps_total                       step attempts run, by workflow, step and outcome
raftflow_step_retries_total                attempts after the first, by workflow and step
raftflow_executions_total                  executions finished here, by workflow and outcome
raftflow_step_duration_seconds             a step attempt's run time, by workflow
raftflow_step_to_step_seconds              end of a step to the start of the next one of the
                                           same execution in the same turn (the commit and
                                           the replay between), by workflow
raftflow_claim_duration_seconds            one claim request (lease + the replay's reads)
raftflow_claimed_total                     events claimed
raftflow_commit_duration_seconds           one group-commit request
raftflow_commit_batch_size                 commits per group-commit request
raftflow_fenced_commits_total              commits refused because their lease was lost
raftflow_commit_failures_total             group-commit requests that failed (handed back)
raftflow_leases_held                       executions this worker holds now
raftflow_turns_in_progress                 executions this worker is handling now
raftflow_queue_depth                       events queued per priority, state ready|queued;
                                           with raftflow_queue_parked (executions'
                                           events, not the cron schedules),
                                           raftflow_queue_waiting_on_limit (per workflow:
                                           executions waiting for a concurrency slot) and
                                           raftflow_queue_oldest_ready_seconds, exported by
                                           the one worker holding the sampling duty
                                           (:mod:`raftflow.engine.runtime.presence`), from its last
                                           beat: sum or max them across workers
=========================================  =====================================================

Each :class:`Metrics` has its own registry (several workers in one process, tests).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from raftflow.engine.ops.scatter import merge_queues
from raftflow.engine.runtime.hooks import Hooks
from raftflow.engine.workflow.context import StepInfo
from raftflow.stores.records import ExecutionRecord, Status

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from raftflow.engine.runtime.worker import Worker

#: Step and request latencies: 1 ms to 60 s.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class Metrics(Hooks):
    """Worker hooks that count into a Prometheus registry (``self.registry``)."""

    samples_queue = True  # compete for the queue-sampling duty

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.steps = Counter(
            "raftflow_steps", "Step attempts run", ["workflow", "step", "outcome"], registry=r
        )
        self.retries = Counter(
            "raftflow_step_retries",
            "Step attempts after the first",
            ["workflow", "step"],
            registry=r,
        )
        self.executions = Counter(
            "raftflow_executions",
            "Executions finished by this worker",
            ["workflow", "outcome"],
            registry=r,
        )
        self.step_duration = Histogram(
            "raftflow_step_duration_seconds",
            "Step attempt run time",
            ["workflow"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.step_to_step = Histogram(
            "raftflow_step_to_step_seconds",
            "From the end of a step to the start of the next one of the same execution",
            ["workflow"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.claim_duration = Histogram(
            "raftflow_claim_duration_seconds",
            "Claim requests",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.claimed = Counter("raftflow_claimed", "Events claimed", registry=r)
        self.commit_duration = Histogram(
            "raftflow_commit_duration_seconds",
            "Group-commit requests",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "raftflow_commit_batch_size",
            "Commits per group-commit request",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.fenced = Counter(
            "raftflow_fenced_commits", "Commits refused: their lease was lost", registry=r
        )
        self.commit_failures = Counter(
            "raftflow_commit_failures", "Group-commit requests that failed", registry=r
        )
        self._lock = threading.Lock()
        self._turns: dict[str, str] = {}  # execution id -> workflow, while its turn lasts
        self._step_ended: dict[str, float] = {}  # execution id -> end of its last step
        self._worker: Worker | None = None
        r.register(_LiveCollector(self))
        self._server: object | None = None

    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` over HTTP in a daemon thread; the port it listens on."""
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def close(self) -> None:
        server = self._server
        if server is not None:
            server.shutdown()  # type: ignore[attr-defined]
            server.server_close()  # type: ignore[attr-defined]
            self._server = None

    # -- hooks ----------------------------------------------------------------------------

    def worker_started(self, worker: Worker) -> None:
        self._worker = worker

    def worker_stopped(self, worker: Worker) -> None:
        with self._lock:
            self._turns.clear()
            self._step_ended.clear()

    def turn_started(self, execution: ExecutionRecord) -> None:
        with self._lock:
            self._turns[execution.id] = execution.workflow

    def turn_ended(self, execution: ExecutionRecord) -> None:
        with self._lock:
            self._turns.pop(execution.id, None)
            self._step_ended.pop(execution.id, None)

    def _workflow(self, execution_id: str) -> str:
        with self._lock:
            return self._turns.get(execution_id, "unknown")

    def before_step(self, step: StepInfo) -> None:
        workflow = self._workflow(step.execution_id)
        now = time.perf_counter()
        with self._lock:
            ended = self._step_ended.get(step.execution_id)
        if ended is not None:
            self.step_to_step.labels(workflow).observe(now - ended)
        if step.attempt > 1:
            self.retries.labels(workflow, step.name).inc()

    def after_step(self, step: StepInfo, *, error: BaseException | None, duration: float) -> None:
        workflow = self._workflow(step.execution_id)
        outcome = "succeeded" if error is None else "failed"
        self.steps.labels(workflow, step.name, outcome).inc()
        self.step_duration.labels(workflow).observe(duration)
        with self._lock:
            self._step_ended[step.execution_id] = time.perf_counter()

    def after_execution(self, execution_id: str, status: Status) -> None:
        self.executions.labels(self._workflow(execution_id), status.value).inc()

    def after_claim(self, *, claimed: int, duration: float) -> None:
        self.claim_duration.observe(duration)
        self.claimed.inc(claimed)

    def after_commit_batch(
        self, *, size: int, applied: int, duration: float, error: BaseException | None
    ) -> None:
        self.commit_duration.observe(duration)
        self.batch_size.observe(size)
        if error is not None:
            self.commit_failures.inc()
        elif size > applied:
            self.fenced.inc(size - applied)


class _LiveCollector(Collector):
    """Gauges read at scrape time: the worker's leases and the sampled queue."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        worker = self.metrics._worker
        held = GaugeMetricFamily("raftflow_leases_held", "Executions this worker holds now")
        held.add_metric([], 0 if worker is None else worker.leases_held)
        yield held
        turns = GaugeMetricFamily("raftflow_turns_in_progress", "Executions handled now")
        turns.add_metric([], (worker.running if worker is not None else None) or 0)
        yield turns
        samples = list(worker.presence.samples.values()) if worker is not None else []
        sample = merge_queues(samples) if samples else None  # sharded: every cluster's
        if sample is None:
            return  # another worker samples the queue
        depth = GaugeMetricFamily(
            "raftflow_queue_depth", "Queued events by priority", labels=["priority", "state"]
        )
        oldest = GaugeMetricFamily(
            "raftflow_queue_oldest_ready_seconds",
            "How long the oldest claimable event of a priority has waited",
            labels=["priority"],
        )
        for p in sample.priorities:
            depth.add_metric([str(p.priority), "queued"], p.groups)
            depth.add_metric([str(p.priority), "ready"], p.ready)
            oldest.add_metric([str(p.priority)], p.oldest_ready_age or 0.0)
        yield depth
        yield oldest
        parked = GaugeMetricFamily(
            "raftflow_queue_parked", "Executions' events parked until a deadline"
        )
        parked.add_metric([], sample.parked)
        yield parked
        waiting = GaugeMetricFamily(
            "raftflow_queue_waiting_on_limit",
            "Executions waiting for a slot of a concurrency limit",
            labels=["workflow"],
        )
        by_workflow: dict[str, int] = {}
        for w in sample.waiting:
            by_workflow[w.workflow] = by_workflow.get(w.workflow, 0) + w.waiting
        for workflow, count in sorted(by_workflow.items()):
            waiting.add_metric([workflow], count)
        yield waiting
