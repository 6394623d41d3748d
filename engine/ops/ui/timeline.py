"""An execution's calls as a timeline: bars placed on the execution's lifetime."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from raftflow.stores.inspect import ExecutionDetail
from raftflow.stores.records import StepRecord


def format_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def format_age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


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
