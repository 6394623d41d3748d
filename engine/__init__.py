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
from raftflow.engine.client.handle import WorkflowHandle
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
from raftflow.engine.runtime.hooks import Hooks
from raftflow.engine.runtime.worker import Worker, WorkerOptions
from raftflow.engine.workflow.context import StepInfo, current_step
from raftflow.engine.workflow.ratelimit import RateLimit
from raftflow.engine.workflow.retry import Retry
from raftflow.engine.workflow.transaction import AsyncTransaction, Transaction
from raftflow.stores.contract import AttemptRecord, ErrorInfo, ExecutionRecord, Status, StepRecord

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
