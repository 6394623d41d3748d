"""The exit codes of every command, and the translation of errors into them."""

from __future__ import annotations

import enum

from raftflow.errors import (
    ConfigurationError,
    InvalidArgumentError,
    RaftflowError,
    ResultTimeoutError,
    SchemaError,
    UnavailableError,
)


class Exit(enum.IntEnum):
    """The exit codes of every command (``raftflow --help`` lists them)."""

    OK = 0
    FAILED = 1  # the execution failed or was cancelled, a replay diverged, or it was refused
    USAGE = 2  # bad arguments or options
    UNAVAILABLE = 3  # the cluster could not be reached (no node, no leader) in time
    TIMEOUT = 4  # still running when --timeout ran out


EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 the execution failed or was cancelled, a replay diverged, or the "
    "request was refused (not found, wrong credentials...); 2 usage error; 3 the cluster is "
    "unavailable; 4 still running when --timeout ran out."
)


class CommandFailed(Exception):
    """A command's own failure, with its exit code (the message goes to stderr)."""

    def __init__(self, message: str, code: int = Exit.FAILED) -> None:
        super().__init__(message)
        self.code = code


def exit_code_of(exc: RaftflowError) -> int:
    if isinstance(exc, UnavailableError):
        return Exit.UNAVAILABLE
    if isinstance(exc, ResultTimeoutError):
        return Exit.TIMEOUT
    if isinstance(exc, InvalidArgumentError):
        return Exit.USAGE
    if isinstance(exc, ConfigurationError) and not isinstance(
        exc, (SchemaError, FileNotFoundError)
    ):
        return Exit.USAGE
    return Exit.FAILED
