"""Errors of the store layer (part of the tree drawn in :mod:`raftflow.transports.errors`)."""

from __future__ import annotations

from raftflow.transports.errors import RaftflowError


class StoreError(RaftflowError):
    """Executions and step records: something is not as asked."""


class ExecutionNotFoundError(StoreError, LookupError):
    """No execution has this id."""


class ExecutionFinishedError(StoreError):
    """The execution is finished: it takes no more messages."""
