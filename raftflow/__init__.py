"""raftflow: durable workflows as plain Python functions, on an rqlite cluster.

Everything an application uses is importable from here; every error also from
:mod:`raftflow.errors`, where the tree is drawn. The subpackages are ``raftflow.engine``
(workflows, steps, workers), ``raftflow.transports`` (the lease-based queue,
:class:`RqliteTransport`) and ``raftflow.stores`` (executions and their records,
:class:`RqliteStore`).

>>> from raftflow import Engine
>>> engine = Engine()   # a local SQLite file; Engine.from_url("http://host:4001") for rqlite

A process that only starts and follows workflows, without their code, uses a
:class:`Client` (``Client.from_url(url).start("checkout", {...})``).
"""

from importlib.metadata import PackageNotFoundError, version

from raftflow import errors
from raftflow.engine.app import Engine
from raftflow.engine.client.client import Client
from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.client.replay import ReplayReport
from raftflow.engine.runtime.hooks import Hooks
from raftflow.engine.runtime.worker import Worker, WorkerOptions
from raftflow.engine.workflow.context import StepInfo, current_step
from raftflow.engine.workflow.ratelimit import RateLimit
from raftflow.engine.workflow.retry import Retry
from raftflow.engine.workflow.transaction import AsyncTransaction, Transaction
from raftflow.errors import *  # noqa: F403  (every error, importable from raftflow too)
from raftflow.errors import (
    ExecutionNotFoundError,
    InvalidArgumentError,
    NonDeterminismError,
    RaftflowError,
    ResultTimeoutError,
    StepError,
    TransactionAbortedError,
    UnavailableError,
    WorkflowCancelledError,
    WorkflowFailedError,
)
from raftflow.stores.records import AttemptRecord, ErrorInfo, ExecutionRecord, Status, StepRecord
from raftflow.stores.rqlite import RqliteStore
from raftflow.transports.rqlite import RqliteTransport

try:
    __version__ = version("raftflow")
except PackageNotFoundError:  # pragma: no cover - imported from a source tree
    __version__ = "0+unknown"

__all__ = [
    "AsyncTransaction",
    "AttemptRecord",
    "Client",
    "Engine",
    "ErrorInfo",
    "ExecutionNotFoundError",
    "ExecutionRecord",
    "Hooks",
    "InvalidArgumentError",
    "NonDeterminismError",
    "RaftflowError",
    "RateLimit",
    "ReplayReport",
    "ResultTimeoutError",
    "Retry",
    "RqliteStore",
    "RqliteTransport",
    "Status",
    "StepError",
    "StepInfo",
    "StepRecord",
    "Transaction",
    "TransactionAbortedError",
    "UnavailableError",
    "Worker",
    "WorkerOptions",
    "WorkflowCancelledError",
    "WorkflowFailedError",
    "WorkflowHandle",
    "__version__",
    "current_step",
    "errors",
]
