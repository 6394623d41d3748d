"""Executions and their calls as the rows and fields the commands print."""

from __future__ import annotations

from typing import Any

from raftflow.engine.ops.timefmt import format_duration, format_time
from raftflow.stores.records import ErrorInfo, ExecutionRecord, StepRecord


def error_line(error: ErrorInfo | None) -> str:
    if error is None:
        return ""
    return f"{error.type}: {error.message}".splitlines()[0][:120]


def execution_row(record: ExecutionRecord, now: float | None = None) -> list[Any]:
    """A row of ``list``: TOOK is the whole run of a finished execution, the time so far
    of one that is not (``now``: the cluster's clock; without it, ``-``)."""
    if record.status.is_final and record.completed_at is not None:
        took = format_duration(record.completed_at - record.created_at)
    else:
        took = _so_far(record.created_at, now)
    return [
        record.id,
        record.workflow,
        record.status.value
        + (" (cancel asked)" if record.cancel_reason and not record.status.is_final else ""),
        record.steps_done,
        format_time(record.created_at),
        took,
    ]


def _so_far(since: float, now: float | None) -> str:
    return "-" if now is None else f"{format_duration(max(0.0, now - since))} so far"


EXECUTION_HEADERS = ["ID", "WORKFLOW", "STATUS", "STEPS", "CREATED", "TOOK"]


def step_row(step: StepRecord, now: float | None = None, live: bool = False) -> list[Any]:
    """A row of ``steps``. A call still waiting while its execution runs (``live``) --
    a sleep before its wake time (recorded at its start), a recv, a retry -- shows what it
    waits for and its time so far; a finished sleep, how long it slept."""
    status, took = step.status, format_duration(step.ended_at - step.started_at)
    asleep = step.kind == "sleep" and step.wake_at is not None
    pending = not step.done or (asleep and now is not None and (step.wake_at or 0) > now)
    if live and pending:
        if step.wake_at is not None:
            kind = "retrying at" if step.status == "retrying" else "waiting until"
            status = f"{kind} {format_time(step.wake_at)}"
        took = _so_far(step.started_at, now)
    elif asleep:
        took = format_duration((step.wake_at or step.started_at) - step.started_at)
    return [
        step.idx,
        step.kind,
        step.name,
        status,
        step.attempts,
        format_time(step.started_at),
        took,
        step.worker_id,
        error_line(step.error),
    ]


STEP_HEADERS = ["#", "KIND", "NAME", "STATUS", "ATTEMPTS", "STARTED", "TOOK", "WORKER", "ERROR"]
