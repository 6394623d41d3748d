"""Structured logs: ``raftflow worker --log-format json`` writes one JSON object per line,
with the execution id and the step (index and name) of the code that logged it.

Where the line comes from decides what it knows: step code (``current_step()``), workflow
code (the activation), or the worker's handling of an execution's turn (the
:class:`LogContext` hook marks the turn's task). Lines from elsewhere (the claim loop, the
committer) carry ``null``; the engine's own messages name the execution in their text too.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import json
import logging
import traceback
from typing import Any

from raftflow.engine.runtime.hooks import Hooks
from raftflow.engine.workflow.context import current_activation, step_or_none
from raftflow.stores.records import ExecutionRecord

_turn: contextvars.ContextVar[str | None] = contextvars.ContextVar("raftflow_turn", default=None)


class LogContext(Hooks):
    """Marks the task of each turn with its execution id, for :class:`JsonFormatter`."""

    def turn_started(self, execution: ExecutionRecord) -> None:
        _turn.set(execution.id)  # the turn's own task: the value dies with it


def log_context() -> dict[str, Any]:
    """``execution_id``, ``step`` (index), ``step_name`` and ``attempt`` of the code
    running here (None where unknown)."""
    step = step_or_none()
    if step is not None:
        return {
            "execution_id": step.execution_id,
            "step": step.index,
            "step_name": step.name,
            "attempt": step.attempt,
        }
    activation = current_activation()
    execution_id = activation.execution_id if activation is not None else _turn.get()
    return {"execution_id": execution_id, "step": None, "step_name": None, "attempt": None}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the execution context,
    and the exception's traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **log_context(),
        }
        if record.exc_info:
            data["exception"] = "".join(traceback.format_exception(*record.exc_info))
        return json.dumps(data, default=str)


def configure_logging(log_format: str = "text", verbose: bool = False) -> None:
    """The worker command's logging: text or JSON lines on stderr."""
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # httpx logs every request at INFO; that is noise for a worker.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
