"""raftflow's engine: durable workflows as plain Python functions.

>>> from engine import Engine
>>> engine = Engine()                      # a local SQLite file; Engine.from_url(...) for rqlite
>>> @engine.step
... def add(a: int, b: int) -> int: ...
>>> @engine.workflow
... def total(values: list[int]) -> int: ...
>>> handle = engine.start(total, [1, 2, 3])
"""

from raftflow.engine.app import Engine
from raftflow.engine.backend import Backend, open_backend
from raftflow.engine.context import StepInfo, current_step
from raftflow.engine.errors import (
    ConfigurationError,
    DatabaseError,
    ExecutionConflictError,
    ExecutionFinishedError,
    ExecutionNotFoundError,
    HistoryLimitError,
    InputValidationError,
    InvalidArgumentError,
    NonDeterminismError,
    NotInWorkflowError,
    PayloadTooLargeError,
    RaftflowError,
    RefusedStatementError,
    ResultTimeoutError,
    SchemaError,
    SchemaOutdatedError,
    SchemaTooNewError,
    StepError,
    StepTimeoutError,
    TransactionAbortedError,
    TransactionError,
    UnavailableError,
    UnknownWorkflowError,
    WorkflowCancelledError,
    WorkflowError,
    WorkflowFailedError,
)
from raftflow.engine.handle import WorkflowHandle
from raftflow.engine.hooks import Hooks
from raftflow.engine.ratelimit import RateLimit
from raftflow.engine.retry import Retry
from raftflow.engine.transaction import AsyncTransaction, Transaction
from raftflow.engine.worker import Worker, WorkerOptions
from raftflow.stores.base import AttemptRecord, ErrorInfo, ExecutionRecord, Status, StepRecord

__all__ = [
    "AsyncTransaction",
    "AttemptRecord",
    "Backend",
    "ConfigurationError",
    "DatabaseError",
    "Engine",
    "ErrorInfo",
    "ExecutionConflictError",
    "ExecutionFinishedError",
    "ExecutionNotFoundError",
    "ExecutionRecord",
    "HistoryLimitError",
    "Hooks",
    "InputValidationError",
    "InvalidArgumentError",
    "NonDeterminismError",
    "NotInWorkflowError",
    "PayloadTooLargeError",
    "RaftflowError",
    "RateLimit",
    "RefusedStatementError",
    "ResultTimeoutError",
    "Retry",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "Status",
    "StepError",
    "StepInfo",
    "StepRecord",
    "StepTimeoutError",
    "Transaction",
    "TransactionAbortedError",
    "TransactionError",
    "UnavailableError",
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
