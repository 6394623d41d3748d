"""Worker lifecycle hooks, for metrics and tracing (dramatiq's middleware, in small).

Subclass :class:`Hooks`, override what you need, and register it with
``engine.add_hooks(MyHooks())``. Hooks run in the worker, in the thread or task that runs
the step; a hook that raises is logged and ignored, never fatal to the step. They must
not block: the worker's I/O shares one event loop with most of them.

In the order a worker meets them::

    worker_started(worker)                 the worker's run began (clock synced)
      after_claim(claimed=, duration=)     one claim request
      turn_started(execution)              a claimed execution is handled (a "turn")
        before_step(step) / after_step()   each step that runs (not the replayed ones)
        after_execution(id, status)        it reached a final status
      turn_ended(execution)                the worker gave it back, or finished it
      after_commit_batch(size=, ...)       one group-commit request
    worker_stopped(worker)                 drained and closed (every cluster's run)

``trace_context()`` is the client's side: ``engine.start`` stores what it returns with the
execution (:mod:`raftflow.engine.ops.tracing`). Built-in hooks: :mod:`raftflow.engine.ops.metrics`
(Prometheus), :mod:`raftflow.engine.ops.tracing` (OpenTelemetry),
:mod:`raftflow.engine.ops.logs` (the execution id on every log line).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from raftflow.engine.workflow.context import StepInfo
from raftflow.stores.records import ExecutionRecord, Status

if TYPE_CHECKING:
    from raftflow.engine.runtime.worker import Worker

log = logging.getLogger("raftflow.hooks")


class Hooks:
    """No-op hooks; override any of them."""

    #: True: the worker competes for the queue-sampling duty (one worker at a time reads
    #: the queue's depth with its presence beat: ``worker.presence.samples``).
    samples_queue: bool = False

    def worker_started(self, worker: Worker) -> None:
        """The worker's run began."""

    def worker_stopped(self, worker: Worker) -> None:
        """The worker drained and is about to close its connection."""

    def after_claim(self, *, claimed: int, duration: float) -> None:
        """A claim request leased ``claimed`` events in ``duration`` seconds."""

    def turn_started(self, execution: ExecutionRecord) -> None:
        """The worker handles a claimed execution (in the task that runs its turn)."""

    def turn_ended(self, execution: ExecutionRecord) -> None:
        """The turn is over (committed and handed on, finished, or given back)."""

    def after_commit_batch(
        self, *, size: int, applied: int, duration: float, error: BaseException | None
    ) -> None:
        """A group-commit request of ``size`` commits: ``applied`` of them applied (the
        others were fenced: their lease was lost), or ``error`` if the request failed."""

    def trace_context(self) -> str | None:
        """Client side, in ``engine.start``: a trace context (text) to store with the new
        execution, or None."""
        return None

    def before_step(self, step: StepInfo) -> None:
        """A step is about to run (not called for steps replayed from their record)."""

    def after_step(self, step: StepInfo, *, error: BaseException | None, duration: float) -> None:
        """A step ran; ``error`` is what it raised, if anything; ``duration`` in seconds."""

    def after_execution(self, execution_id: str, status: Status) -> None:
        """An execution reached a final status (committed)."""


class HookChain(Hooks):
    """Calls several hooks in order, logging (not raising) what they raise."""

    def __init__(self, hooks: Sequence[Hooks] = ()) -> None:
        self.hooks = list(hooks)

    def _each(self, name: str, *args: Any, **kwargs: Any) -> None:
        for hook in self.hooks:
            try:
                getattr(hook, name)(*args, **kwargs)
            except Exception:
                log.exception("hook %s.%s failed", type(hook).__name__, name)

    def before_step(self, step: StepInfo) -> None:
        self._each("before_step", step)

    def after_step(self, step: StepInfo, *, error: BaseException | None, duration: float) -> None:
        self._each("after_step", step, error=error, duration=duration)

    def after_execution(self, execution_id: str, status: Status) -> None:
        self._each("after_execution", execution_id, status)

    @property
    def samples_queue(self) -> bool:  # type: ignore[override]
        return any(hook.samples_queue for hook in self.hooks)

    def worker_started(self, worker: Worker) -> None:
        self._each("worker_started", worker)

    def worker_stopped(self, worker: Worker) -> None:
        self._each("worker_stopped", worker)

    def after_claim(self, *, claimed: int, duration: float) -> None:
        self._each("after_claim", claimed=claimed, duration=duration)

    def turn_started(self, execution: ExecutionRecord) -> None:
        self._each("turn_started", execution)

    def turn_ended(self, execution: ExecutionRecord) -> None:
        self._each("turn_ended", execution)

    def after_commit_batch(
        self, *, size: int, applied: int, duration: float, error: BaseException | None
    ) -> None:
        self._each("after_commit_batch", size=size, applied=applied, duration=duration, error=error)

    def trace_context(self) -> str | None:
        for hook in self.hooks:
            try:
                context = hook.trace_context()
            except Exception:
                log.exception("hook %s.trace_context failed", type(hook).__name__)
                continue
            if context is not None:
                return context
        return None
