"""Every error raftflow raises, in one tree (importable from here)::

RaftflowError
├── InvalidArgumentError (ValueError)   bad input at a public call; nothing was written
│   ├── PayloadTooLargeError             a JSON payload over the size limit
│   └── InputValidationError             workflow input fails its annotation
├── ConfigurationError                  a URL or an option that cannot work
│   └── SchemaError                     the database's schema is not this code's
│       ├── SchemaOutdatedError         older: run `raftflow migrate` (or auto_migrate)
│       └── SchemaTooNewError           newer: upgrade raftflow, never downgrade
├── DatabaseError                       the backend failed a request
│   ├── UnavailableError                no node / no leader within the retry budget
│   ├── AuthenticationError             rqlite answered 401
│   ├── StatementError                  one statement failed; names it
│   └── ProtocolError                   an answer rqlite would not send
├── LeaseError                          a Lease that cannot be used
│   └── LeaseLostError                  it lapsed and another worker took over
├── StoreError
│   ├── ExecutionNotFoundError          no execution has this id
│   └── ExecutionFinishedError          it is finished: it takes no more messages
└── WorkflowError                       defining, starting and running workflows
    ├── UnknownWorkflowError            not registered with this engine
    ├── NotInWorkflowError              a call that only works inside a workflow or step
    ├── ExecutionConflictError          the id exists for another workflow
    ├── StepError                       raised in a workflow when one of its steps failed
    ├── StepTimeoutError (TimeoutError)  a step's attempt ran longer than its timeout
    ├── NonDeterminismError             replay met a different step than recorded
    ├── HistoryLimitError               a run recorded Engine(max_history=...) calls
    ├── TransactionError                a transaction step used its Transaction wrongly
    │   ├── TransactionAbortedError     its writes were refused: nothing was written
    │   └── RefusedStatementError (InvalidArgumentError)  a statement it may not run
    ├── WorkflowFailedError             result() of a failed execution
    ├── WorkflowCancelledError          result() of a cancelled execution
    └── ResultTimeoutError (TimeoutError)  result() waited longer than its timeout
"""

from __future__ import annotations

from raftflow.stores.contract import ErrorInfo
from raftflow.stores.errors import ExecutionFinishedError, ExecutionNotFoundError, StoreError
from raftflow.transports.db.schema import SchemaError, SchemaOutdatedError, SchemaTooNewError
from raftflow.transports.errors import (
    AuthenticationError,
    ConfigurationError,
    DatabaseError,
    InvalidArgumentError,
    LeaseError,
    LeaseLostError,
    PayloadTooLargeError,
    ProtocolError,
    RaftflowError,
    StatementError,
    UnavailableError,
)

__all__ = [
    "AuthenticationError",
    "ConfigurationError",
    "DatabaseError",
    "ExecutionConflictError",
    "ExecutionFinishedError",
    "ExecutionNotFoundError",
    "HistoryLimitError",
    "InputValidationError",
    "InvalidArgumentError",
    "LeaseError",
    "LeaseLostError",
    "NonDeterminismError",
    "NotInWorkflowError",
    "PayloadTooLargeError",
    "ProtocolError",
    "RaftflowError",
    "RefusedStatementError",
    "ResultTimeoutError",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "StatementError",
    "StepError",
    "StepTimeoutError",
    "StoreError",
    "TransactionAbortedError",
    "TransactionError",
    "UnavailableError",
    "UnknownWorkflowError",
    "WorkflowCancelledError",
    "WorkflowError",
    "WorkflowFailedError",
]


class WorkflowError(RaftflowError):
    """Defining, starting or running a workflow went wrong."""


class InputValidationError(InvalidArgumentError, WorkflowError):
    """The input of ``engine.start`` does not validate against the workflow's annotation."""


class UnknownWorkflowError(WorkflowError, LookupError):
    """The workflow is not registered with this engine (``@engine.workflow``)."""


class NotInWorkflowError(WorkflowError):
    """A function that acts on the current execution (or step) was called outside it."""


class ExecutionConflictError(WorkflowError):
    """``execution_id`` already names an execution of another workflow."""


class StepTimeoutError(WorkflowError, TimeoutError):
    """A step's attempt ran longer than ``@engine.step(timeout=...)``; retried per its
    ``Retry``, then its error."""


class HistoryLimitError(WorkflowError):
    """A run of a workflow reached ``Engine(max_history=...)`` recorded calls."""


class NonDeterminismError(WorkflowError):
    """Replaying the workflow met a step other than the one recorded at that position:
    the workflow's code changed, or it chooses steps from something not recorded."""


class StepError(WorkflowError):
    """A step failed; raised where the workflow called it, on the first run and on replay.

    ``error`` is the step's exception as stored (type name, message, traceback); on the
    first run the original exception is also the ``__cause__``.
    """

    def __init__(self, step: str, error: ErrorInfo) -> None:
        super().__init__(f"step {step!r} failed: {error.type}: {error.message}")
        self.step = step
        self.error = error


class WorkflowFailedError(WorkflowError):
    """The execution failed; ``error`` holds the exception's type, message and traceback."""

    def __init__(self, execution_id: str, error: ErrorInfo) -> None:
        super().__init__(f"execution {execution_id!r} failed: {error.type}: {error.message}")
        self.execution_id = execution_id
        self.error = error


class WorkflowCancelledError(WorkflowError):
    """The execution was cancelled (``engine.cancel``, its parent's cancel, or its
    ``timeout``); the message says which."""


class ResultTimeoutError(WorkflowError, TimeoutError):
    """``result(timeout=...)`` gave up before the execution finished."""


class TransactionError(WorkflowError):
    """A transaction step (``@engine.transaction``) misused its :class:`Transaction`: a
    read after a write, a read that failed, the transaction used after its attempt."""


class TransactionAbortedError(TransactionError):
    """A transaction step's writes did not apply -- a statement failed or touched another
    number of rows than its ``expect_rows`` -- so nothing was written and no checkpoint
    was recorded; the attempt failed (retried per the step's ``Retry``)."""


class RefusedStatementError(InvalidArgumentError, TransactionError):
    """A statement a transaction step may not run: not SQLAlchemy, DDL, transaction
    control, several statements, RETURNING, raftflow's own tables or ``sqlite_`` names,
    or parameters that are not JSON scalars."""
