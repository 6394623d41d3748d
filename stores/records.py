"""The store's records: executions, their status, their step records, and what a claim
reads for a run (its execution, its records, its unread signals, its children)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from raftflow.transports.contract import Lease


class Status(str, enum.Enum):
    """The life of an execution: pending -> running -> succeeded | failed (| cancelled)."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONTINUED = "continued"  # a run that continue_as_new ended (kept as "<id>#<run>")

    def __str__(self) -> str:
        return self.value

    @property
    def is_final(self) -> bool:
        return self in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.CONTINUED)


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An exception as stored: its type name, message and formatted traceback."""

    type: str
    message: str
    traceback: str = ""

    def to_json(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message, "traceback": self.traceback}

    @classmethod
    def from_json(cls, value: Any) -> ErrorInfo:
        if not isinstance(value, dict):
            return cls(type="Error", message=str(value))
        return cls(
            type=str(value.get("type", "Error")),
            message=str(value.get("message", "")),
            traceback=str(value.get("traceback", "")),
        )


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """One execution as stored. ``input`` and ``output`` are JSON values."""

    id: str
    workflow: str
    status: Status
    input: Any
    output: Any
    error: ErrorInfo | None
    priority: int
    created_at: float
    updated_at: float
    completed_at: float | None
    steps_done: int
    parent_id: str | None = None  # the execution that started it as a child
    cancel_reason: str | None = None  # a cancel was asked (it is done at the next event)
    deadline: float | None = None  # @engine.workflow(timeout=...): cancelled if running then
    trace_context: str | None = None  # JSON W3C trace context of the start (tracing)
    run: int = 1  # 1, then one more at each engine.continue_as_new()
    commit_id: str | None = field(default=None, repr=False)  # the last full commit
    last_idx: int | None = field(default=None, repr=False)  # the last recorded call


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One failed attempt of a retried step. ``resumed_at``: the execution was resumed
    after this attempt (``engine.resume``), and the step's ``Retry`` counts from there."""

    attempt: int
    type: str
    message: str
    started_at: float
    ended_at: float
    resumed_at: float | None = None


@dataclass(frozen=True, slots=True)
class StepRecord:
    """The record of one call of a workflow, at its position ``idx``: a step's result
    (JSON) or error, or a sleep, a recv, a send, a child's start or wait, an event set.

    ``status`` is ``succeeded`` or ``failed`` once the call is done; ``waiting`` (a recv or
    a wait until ``wake_at``) or ``retrying`` (a step whose attempt ``attempts`` failed and
    whose next one is due at ``wake_at``) while it is not. ``history`` holds the failed
    attempts of a retried step.
    """

    execution_id: str
    idx: int
    name: str
    succeeded: bool
    output: Any
    error: ErrorInfo | None
    started_at: float
    ended_at: float
    worker_id: str
    kind: str = "step"
    status: str = "succeeded"
    attempts: int = 1
    wake_at: float | None = None
    history: tuple[AttemptRecord, ...] = ()

    @property
    def done(self) -> bool:
        return self.status in ("succeeded", "failed")

    @property
    def attempts_before_resume(self) -> int:
        """The attempts made before the execution's last resume (0: never resumed): a
        resumed step gets its ``Retry``'s attempts anew, its history kept."""
        return max((a.attempt for a in self.history if a.resumed_at is not None), default=0)


@dataclass(frozen=True, slots=True)
class StartOutcome:
    """What ``start`` found: the execution, and whether this call created it."""

    record: ExecutionRecord
    created: bool
    #: With a leased start (the engine's fast path): the first event's message and deadline.
    lease_seq: int | None = None
    lease_expiry: float | None = None


@dataclass(frozen=True, slots=True)
class Signal:
    """An unread message sent to an execution."""

    seq: int
    topic: str
    payload: Any


@dataclass(frozen=True, slots=True)
class ChildState:
    """A child execution as its parent's claim read it."""

    id: str
    workflow: str
    status: Status
    output: Any
    error: ErrorInfo | None


@dataclass(frozen=True, slots=True)
class Claimed:
    """One leased event and what its run needs, read in the claim's own transaction."""

    lease: Lease
    execution: ExecutionRecord | None  # None: the execution is gone
    steps: list[StepRecord]
    signals: list[Signal] = field(default_factory=list)
    children: dict[str, ChildState] = field(default_factory=dict)
