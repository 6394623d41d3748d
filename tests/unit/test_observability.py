"""Metrics, traces, JSON logs and worker presence, on the embedded SQLite backend (the
same hooks and SQL as on rqlite; tests/integration/test_cli.py scrapes a worker process)."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from raftflow.engine.ops.logs import JsonFormatter, LogContext
from raftflow.engine.ops.metrics import Metrics
from raftflow.stores.inspect import Inspector

from raftflow import Engine, Retry, current_step
from tests.support import wait_until

log = logging.getLogger("tests.app")


def build(path: Path) -> Engine:
    engine = Engine.from_url(f"sqlite:///{path}")

    @engine.step
    def add(a: int, b: int) -> int:
        log.info("adding %d and %d", a, b)
        return a + b

    @engine.step(retry=Retry(max_attempts=3, delay=0.01))
    def flaky() -> int:
        if current_step().attempt == 1:
            raise ConnectionError("first attempt fails")
        return current_step().attempt

    @engine.workflow
    def total(values: list[int]) -> int:
        result = 0
        for value in values:
            result = add(result, value)
        return result + flaky() - 2

    @engine.workflow
    def broken(_: None) -> None:
        raise RuntimeError("boom")

    return engine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = build(tmp_path / "obs.db")
    yield engine
    engine.close()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus' text format."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name}{labels} in:\n{text}")


def test_metrics_count_steps_executions_requests_and_sample_the_queue(engine: Engine) -> None:
    metrics = Metrics()
    engine.add_hooks(metrics)
    port = metrics.serve(0)
    try:
        # Started before the worker runs, so that it claims them (started while it runs,
        # they would be handed to it in memory: no claim to time).
        handles = [engine.start("total", [1, 2, 3]) for _ in range(3)]
        failing = engine.start("broken", None)
        with engine.running_worker(concurrency=4) as worker:
            assert [h.result(timeout=30) for h in handles] == [6, 6, 6]
            with pytest.raises(Exception, match="boom"):
                failing.result(timeout=30)
            wait_until(lambda: worker.presence.sampler and worker.presence.queue is not None)
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        sample_ = sample
        assert (
            sample_(text, "raftflow_steps_total", workflow="total", step="add", outcome="succeeded")
            == 9
        )
        assert (
            sample_(text, "raftflow_steps_total", workflow="total", step="flaky", outcome="failed")
            == 3
        )
        assert sample_(text, "raftflow_step_retries_total", workflow="total", step="flaky") == 3
        assert (
            sample_(text, "raftflow_executions_total", workflow="total", outcome="succeeded") == 3
        )
        assert sample_(text, "raftflow_executions_total", workflow="broken", outcome="failed") == 1
        assert sample_(text, "raftflow_step_duration_seconds_count", workflow="total") == 15
        assert sample_(text, "raftflow_step_to_step_seconds_count", workflow="total") >= 6
        assert sample_(text, "raftflow_claim_duration_seconds_count") >= 1
        assert sample_(text, "raftflow_commit_batch_size_count") >= 1
        assert sample_(text, "raftflow_fenced_commits_total") == 0
        assert sample_(text, "raftflow_leases_held") >= 0
        # The queue sample of the one worker holding the duty.
        assert sample_(text, "raftflow_queue_depth", priority="0", state="queued") >= 0
        assert sample_(text, "raftflow_queue_parked") >= 0
    finally:
        metrics.close()


def test_presence_lists_the_worker_then_marks_it_stopped(engine: Engine) -> None:
    inspector = Inspector(engine.store.database)
    with engine.running_worker(concurrency=2, worker_id="w-presence") as worker:
        seen = wait_until(lambda: inspector.workers())
        assert [w.worker_id for w in seen] == ["w-presence"]
        assert seen[0].state == "running" and seen[0].concurrency == 2
        # The worker notes its beat once the write's answer is back: after the row is
        # visible to others.
        wait_until(lambda: worker.presence.seen_at is not None)
        assert not worker.presence.sampler  # no hook asked for the sampling duty
    (stopped,) = inspector.workers()
    assert stopped.state == "stopped"


def test_json_logs_name_the_execution_and_the_step(engine: Engine) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    engine.add_hooks(LogContext())
    try:
        with engine.running_worker():
            handle = engine.start("total", [5])
            assert handle.result(timeout=30) == 5
    finally:
        log.removeHandler(handler)
    (line,) = [json.loads(text) for text in stream.getvalue().splitlines()]
    assert line["message"] == "adding 0 and 5"
    assert line["execution_id"] == handle.id
    assert line["step"] == 0 and line["step_name"] == "add" and line["attempt"] == 1
    assert line["level"] == "info" and line["logger"] == "tests.app"


def test_traces_continue_the_starters_trace_with_a_span_per_turn_and_step(
    engine: Engine,
) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from raftflow.engine.ops.tracing import Tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine.add_hooks(Tracing(tracer_provider=provider))
    caller = provider.get_tracer("test")
    with caller.start_as_current_span("http request") as root:
        handle = engine.start("total", [1, 2])
    assert handle.info().trace_context is not None
    untraced = engine.start("total", [4])  # outside any span: nothing stored
    assert untraced.info().trace_context is None
    with engine.running_worker():
        assert handle.result(timeout=30) == 3
        assert untraced.result(timeout=30) == 4
    provider.force_flush()
    spans = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get("raftflow.execution_id") == handle.id
    ]
    trace_id = root.get_span_context().trace_id
    turns = [s for s in spans if s.name == "raftflow.turn total"]
    steps = [s for s in spans if s.name.startswith("raftflow.step ")]
    assert turns and all(s.context.trace_id == trace_id for s in spans)
    assert all(
        t.parent is not None and t.parent.span_id == root.get_span_context().span_id for t in turns
    )
    turn_ids = {t.context.span_id for t in turns}
    assert all(s.parent is not None and s.parent.span_id in turn_ids for s in steps)
    attempts = sorted(
        (
            s.attributes["raftflow.step.index"],
            s.attributes["raftflow.step.name"],
            s.attributes["raftflow.step.attempt"],
        )
        for s in steps
        if s.attributes
    )
    assert attempts == [(0, "add", 1), (1, "add", 1), (2, "flaky", 1), (2, "flaky", 2)]
    failed = [
        s
        for s in steps
        if s.attributes
        and s.attributes["raftflow.step.attempt"] == 1
        and s.attributes["raftflow.step.name"] == "flaky"
    ]
    assert failed[0].status.status_code.name == "ERROR" and failed[0].events  # the exception
    assert any(t.attributes and t.attributes.get("raftflow.status") == "succeeded" for t in turns)


def test_a_worker_on_several_clusters_samples_the_queue_of_each(tmp_path: Path) -> None:
    """Sharded, a worker beats on every cluster and samples each queue whose duty it
    holds: the queue metrics are the sum of the clusters' (one cluster's sample no longer
    overwrites another's)."""
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'a.db'};sqlite:///{tmp_path / 'b.db'}")

    @engine.workflow
    def naps() -> None:
        engine.sleep(3600)

    metrics = Metrics()
    engine.add_hooks(metrics)
    port = metrics.serve(0)
    ids = [f"nap-{i}" for i in range(6)]
    assert len({engine.shards.of(i).name for i in ids}) == 2
    try:
        with engine.running_worker() as worker:
            for execution_id in ids:
                engine.start(naps, execution_id=execution_id)
            wait_until(lambda: len(worker.presence.samples) == 2)
            wait_until(lambda: sum(s.parked for s in worker.presence.samples.values()) == 6)
            text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        assert sample(text, "raftflow_queue_parked") == 6
    finally:
        metrics.close()
        engine.close()
