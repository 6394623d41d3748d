"""An execution's calls as a timeline: bars placed on the execution's lifetime."""

from __future__ import annotations

from dataclasses import dataclass

from raftflow.engine.ops.timefmt import format_duration
from raftflow.stores.inspect import ExecutionDetail
from raftflow.stores.records import StepRecord


def format_age(seconds: float | None) -> str:
    return format_duration(seconds, spelled=True)


@dataclass(frozen=True)
class Bar:
    step: StepRecord
    left: float  # percent of the lifetime
    width: float  # percent, at least a sliver
    duration: float
    offset: float  # seconds after the start


def timeline(detail: ExecutionDetail) -> list[Bar]:
    execution = detail.execution
    start = execution.created_at
    end = execution.completed_at or detail.now
    end = max([end, *(s.ended_at for s in detail.steps)])
    span = max(end - start, 1e-6)
    bars = []
    for step in detail.steps:
        ended = step.ended_at if step.done else max(step.ended_at, step.wake_at or step.ended_at)
        left = min(max((step.started_at - start) / span * 100, 0.0), 99.5)
        width = min(max((ended - step.started_at) / span * 100, 0.5), 100 - left)
        bars.append(
            Bar(step, left, width, step.ended_at - step.started_at, step.started_at - start)
        )
    return bars


def durations(detail: ExecutionDetail) -> float:
    """How long the execution took (or has run so far)."""
    execution = detail.execution
    return (execution.completed_at or detail.now) - execution.created_at
