"""Every error raftflow raises, in one tree (each importable from here and from ``raftflow``)::

RaftflowError
├── InvalidArgumentError (ValueError)   bad input at a public call; nothing was written
│   ├── PayloadTooLargeError            a JSON payload over the size limit
│   └── InputValidationError            workflow input fails its annotation
├── ConfigurationError                  a URL or an option that cannot work
│   ├── SchemaError                     the database's schema is not this code's
│   │   ├── SchemaOutdatedError         older: run `raftflow migrate` (or auto_migrate)
│   │   └── SchemaTooNewError           newer: upgrade raftflow, never downgrade
│   ├── StaleCatalogError               sharded: a partition moved since this process read
│   └── RqliteNotFoundError             no rqlited binary (the local-cluster harness)
├── DatabaseError                       the database failed a request
│   ├── UnavailableError                no node / no leader within the retry budget
│   ├── AuthenticationError             rqlite answered 401
│   ├── StatementError                  one statement failed; names it
│   └── ProtocolError                   an answer rqlite would not send
├── LeaseError                          a Lease that cannot be used
│   └── LeaseLostError                  it lapsed and another worker took over
├── StoreError                          executions and their records
│   ├── ExecutionNotFoundError          no execution has this id
│   └── ExecutionFinishedError          it is finished: it takes no more messages
├── WorkflowError                       defining, starting and running workflows
│   ├── UnknownWorkflowError            not registered with this engine
│   ├── NotInWorkflowError              a call that only works inside a workflow or step
│   ├── ExecutionConflictError          the id exists for another workflow
│   ├── StepError                       raised in a workflow when one of its steps failed
│   ├── StepTimeoutError (TimeoutError) a step's attempt ran longer than its timeout
│   ├── NonDeterminismError             replay met a different step than recorded
│   ├── HistoryLimitError               a run recorded Engine(max_history=...) calls
│   ├── TransactionError                a transaction step used its Transaction wrongly
│   │   ├── TransactionAbortedError     its writes were refused: nothing was written
│   │   └── RefusedStatementError (InvalidArgumentError)  a statement it may not run
│   ├── StreamError                     a workflow's write to a durable stream refused
│   │   ├── StreamClosedError           the stream was closed: no more values
│   │   └── StreamFullError             the stream holds MAX_STREAM_VALUES values
│   ├── WorkflowFailedError             result() of a failed execution
│   ├── WorkflowCancelledError          result() of a cancelled execution
│   └── ResultTimeoutError (TimeoutError)  result() waited longer than its timeout
└── ClusterError                        the local-cluster harness: a cluster not up in time
    ├── NodeExitedError                 an rqlited process exited
    └── RqliteInstallError              installing rqlited failed
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raftflow.stores.records import ErrorInfo

__all__ = [
    "AuthenticationError",
    "ClusterError",
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
    "NodeExitedError",
    "NonDeterminismError",
    "NotInWorkflowError",
    "PayloadTooLargeError",
    "ProtocolError",
    "RaftflowError",
    "RefusedStatementError",
    "ResultTimeoutError",
    "RqliteInstallError",
    "RqliteNotFoundError",
    "SchemaError",
    "SchemaOutdatedError",
    "SchemaTooNewError",
    "StaleCatalogError",
    "StatementError",
    "StepError",
    "StepTimeoutError",
    "StoreError",
    "StreamClosedError",
    "StreamError",
    "StreamFullError",
    "TransactionAbortedError",
    "TransactionError",
    "UnavailableError",
    "UnknownWorkflowError",
    "WorkflowCancelledError",
    "WorkflowError",
    "WorkflowFailedError",
]


class RaftflowError(Exception):
    """Base class of every error raftflow raises on purpose."""


# -- bad input and configuration -------------------------------------------------------


class InvalidArgumentError(RaftflowError, ValueError):
    """A public call got an argument of the wrong type, range or size; nothing was written."""


class PayloadTooLargeError(InvalidArgumentError):
    """A serialized payload exceeds the configured maximum size."""


class ConfigurationError(RaftflowError):
    """A URL or an option that cannot work (unknown scheme, mismatched backends, ...)."""


class StaleCatalogError(ConfigurationError):
    """A sharded process routed by a catalog older than the deployment's: a partition has
    moved to another cluster since it read it (restart it with the current URL)."""


class SchemaError(ConfigurationError):
    """The database's schema is not the one this code runs on."""


class SchemaOutdatedError(SchemaError):
    """The database's schema is older than this code's: migrate it first."""


class SchemaTooNewError(SchemaError):
    """The database's schema is newer than this code's: upgrade the code, never downgrade."""


# -- the database ----------------------------------------------------------------------


class DatabaseError(RaftflowError):
    """The database (rqlite or SQLite) failed a request."""


class UnavailableError(DatabaseError):
    """No node could serve the request within the retry budget.

    ``ambiguous`` is true when an attempt may have reached the leader: a write may then
    have been applied even though no answer came back.
    """

    def __init__(self, message: str, *, ambiguous: bool = False) -> None:
        super().__init__(message)
        self.ambiguous = ambiguous


class AuthenticationError(DatabaseError):
    """rqlite refused the request with 401 (bad credentials or missing permission)."""


class StatementError(DatabaseError):
    """One statement of a request failed.

    ``statement`` is the name of the statement in the SQL catalogue (e.g. ``queue.claim``)
    and ``error`` the database's own message.
    """

    def __init__(self, statement: str, error: str) -> None:
        super().__init__(f"{statement} failed: {error}")
        self.statement = statement
        self.error = error


class ProtocolError(DatabaseError):
    """The database answered something that is not a valid response."""


# -- the queue and the store -----------------------------------------------------------


class LeaseError(RaftflowError):
    """A Lease that cannot be used here: foreign to this transport, or already settled."""


class LeaseLostError(LeaseError):
    """The lease lapsed and another worker claimed (or settled) the message."""


class StoreError(RaftflowError):
    """Executions and step records: something is not as asked."""


class ExecutionNotFoundError(StoreError, LookupError):
    """No execution has this id."""


class ExecutionFinishedError(StoreError):
    """The execution is finished: it takes no more messages."""


# -- workflows -------------------------------------------------------------------------


class WorkflowError(RaftflowError):
    """Defining, starting or running a workflow went wrong."""


class InputValidationError(InvalidArgumentError, WorkflowError):
    """The input of ``engine.start`` does not validate against the workflow's annotation."""


class UnknownWorkflowError(WorkflowError, LookupError):
    """The workflow is not registered with this engine (``@engine.workflow``), or (a
    :class:`~raftflow.Client`'s start by name) no running worker serves it in that queue."""


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


class StreamError(WorkflowError):
    """A workflow's ``write_stream`` was refused (recorded: a replay raises it again)."""


class StreamClosedError(StreamError):
    """The stream was closed by ``close_stream``: it takes no more values."""


class StreamFullError(StreamError):
    """The stream holds its maximum number of values (``MAX_STREAM_VALUES``)."""


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


# -- the local-cluster harness (raftflow.transports.rqlite.local) -------------------------


class RqliteNotFoundError(ConfigurationError, FileNotFoundError):
    """No usable ``rqlited`` binary was found; the message says how to get one."""


class ClusterError(RaftflowError):
    """The local cluster did not reach the state asked for (ready, a leader …) in time."""


class NodeExitedError(ClusterError):
    """An ``rqlited`` process that should be running has exited; the log tail is included."""

    def __init__(self, message: str, *, port_in_use: bool = False) -> None:
        super().__init__(message)
        self.port_in_use = port_in_use


class RqliteInstallError(ClusterError):
    """Installing the rqlite binaries failed (platform, download or integrity)."""
