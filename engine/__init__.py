"""raftflow's engine: durable workflows as plain Python functions.

>>> from engine import Engine
>>> engine = Engine()                      # a local SQLite file; Engine.from_url(...) for rqlite
>>> @engine.step
... def add(a: int, b: int) -> int: ...
>>> @engine.workflow
... def total(values: list[int]) -> int: ...
>>> handle = engine.start(total, [1, 2, 3])
"""

from engine.activation import StepInfo, current_step
from engine.app import Engine, open_backend
from engine.errors import (
    ExecutionConflictError,
    ExecutionNotFoundError,
    InputValidationError,
    NonDeterminismError,
    RaftflowError,
    ResultTimeoutError,
    StepError,
    UnknownWorkflowError,
    WorkflowCancelledError,
    WorkflowError,
    WorkflowFailedError,
)
from engine.handle import WorkflowHandle
from engine.hooks import Hooks
from engine.worker import Worker, WorkerOptions
from stores.base import ErrorInfo, ExecutionRecord, Status, StepRecord

__all__ = [
    "Engine",
    "ErrorInfo",
    "ExecutionConflictError",
    "ExecutionNotFoundError",
    "ExecutionRecord",
    "Hooks",
    "InputValidationError",
    "NonDeterminismError",
    "RaftflowError",
    "ResultTimeoutError",
    "Status",
    "StepError",
    "StepInfo",
    "StepRecord",
    "UnknownWorkflowError",
    "Worker",
    "WorkerOptions",
    "WorkflowCancelledError",
    "WorkflowError",
    "WorkflowFailedError",
    "WorkflowHandle",
    "current_step",
    "open_backend",
]
