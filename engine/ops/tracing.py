"""OpenTelemetry traces (``pip install 'raftflow[otel]'``): a span per execution turn and
per step, continuing the trace of the code that started the execution.

Register :class:`Tracing` on the engine in the process that starts executions *and* in the
workers (``engine.add_hooks(Tracing())``, or ``raftflow worker --otel``); configure the
tracer provider and its exporter as usual in your app (the SDK is yours to pick)::

    engine.start(checkout, order)          # inside a span: its W3C context is stored with
                                           # the execution (column executions.trace_context)
    raftflow.turn checkout                 # a worker handling the execution: child of it
      raftflow.step charge_card            # each step attempt that runs, with
                                           # raftflow.execution_id, raftflow.step.index,
                                           # raftflow.step.attempt; errors recorded

The context is stored with the execution, in the start's own transaction, rather than in
its input: the input stays the workflow's argument, and every later turn (after a crash,
on another worker, days later after a durable sleep) continues the same trace. Steps
replayed from their record make no span: they do not run. Children started by a workflow
start traces of their own (their start is a recorded call of the parent, not client code).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from raftflow.engine.runtime.hooks import Hooks
from raftflow.engine.workflow.context import StepInfo
from raftflow.stores.records import ExecutionRecord, Status

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "raftflow.engine.ops.tracing needs OpenTelemetry: pip install 'raftflow[otel]'"
    ) from exc

_StepKey = tuple[str, int, int]


class Tracing(Hooks):
    """Spans per turn and per step, and the start's trace context stored with the
    execution. ``tracer_provider``: default, the global one."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        from raftflow.engine.runtime.presence import VERSION

        self.tracer = trace.get_tracer("raftflow", VERSION, tracer_provider=tracer_provider)
        self._lock = threading.Lock()
        self._turns: dict[str, trace.Span] = {}
        self._steps: dict[_StepKey, tuple[trace.Span, object]] = {}

    # -- client side ----------------------------------------------------------------------

    def trace_context(self) -> str | None:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return json.dumps(carrier, sort_keys=True) if "traceparent" in carrier else None

    # -- worker side ----------------------------------------------------------------------

    def turn_started(self, execution: ExecutionRecord) -> None:
        parent = _extract(execution.trace_context)
        span = self.tracer.start_span(
            f"raftflow.turn {execution.workflow}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                "raftflow.execution_id": execution.id,
                "raftflow.workflow": execution.workflow,
                "raftflow.steps_done": execution.steps_done,
            },
        )
        with self._lock:
            self._turns[execution.id] = span

    def turn_ended(self, execution: ExecutionRecord) -> None:
        with self._lock:
            span = self._turns.pop(execution.id, None)
        if span is not None:
            span.end()

    def after_execution(self, execution_id: str, status: Status) -> None:
        with self._lock:
            span = self._turns.get(execution_id)
        if span is not None:
            span.set_attribute("raftflow.status", status.value)
            if status is Status.FAILED:
                span.set_status(StatusCode.ERROR, "the execution failed")

    def before_step(self, step: StepInfo) -> None:
        with self._lock:
            turn = self._turns.get(step.execution_id)
        parent = trace.set_span_in_context(turn) if turn is not None else None
        span = self.tracer.start_span(
            f"raftflow.step {step.name}",
            context=parent,
            attributes={
                "raftflow.execution_id": step.execution_id,
                "raftflow.step.index": step.index,
                "raftflow.step.name": step.name,
                "raftflow.step.attempt": step.attempt,
            },
        )
        # Current while the step runs (same thread or task as after_step): spans the step's
        # own code makes are its children.
        token = otel_context.attach(trace.set_span_in_context(span))
        with self._lock:
            self._steps[(step.execution_id, step.index, step.attempt)] = (span, token)

    def after_step(self, step: StepInfo, *, error: BaseException | None, duration: float) -> None:
        with self._lock:
            entry = self._steps.pop((step.execution_id, step.index, step.attempt), None)
        if entry is None:
            return
        span, token = entry
        if error is not None:
            span.record_exception(error)
            span.set_status(StatusCode.ERROR, f"{type(error).__name__}: {error}")
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        finally:
            span.end()


def _extract(text: str | None) -> Any:
    if not text:
        return None
    try:
        carrier = json.loads(text)
    except ValueError:
        return None
    return propagate.extract(carrier) if isinstance(carrier, dict) else None
