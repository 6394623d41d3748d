"""The root of raftflow's exception tree and the errors of the database layer.

Every exception raftflow raises on purpose derives from :class:`RaftflowError`::

    RaftflowError
    ├── InvalidArgumentError (ValueError)   bad input at a public call; nothing was written
    │   └── PayloadTooLargeError             a JSON payload over the documented size limit
    ├── ConfigurationError                  a URL or an option that cannot work
    ├── DatabaseError                       the backend (rqlite or SQLite) failed a request
    │   ├── UnavailableError                no node answered / no leader within the retry budget
    │   ├── AuthenticationError             rqlite answered 401 (credentials or permission)
    │   ├── StatementError                  one statement failed; names the statement
    │   └── ProtocolError                   a response that is not what rqlite sends
    ├── LeaseError                          a Lease that cannot be used (foreign, already settled)
    │   └── LeaseLostError                  the lease lapsed and another worker holds or settled it
    ├── StoreError                          (stores.errors) executions and step records
    ├── WorkflowError                       (engine.errors) what a workflow run raises
    └── ClusterError, RqliteInstallError    (transports.rqlite.local) the local-cluster
                                            harness: a cluster that did not come up, an
                                            install that failed (RqliteNotFoundError is a
                                            ConfigurationError)

``raftflow.engine.errors`` re-exports the whole tree.
"""

from __future__ import annotations


class RaftflowError(Exception):
    """Base class of every error raftflow raises on purpose."""


class InvalidArgumentError(RaftflowError, ValueError):
    """A public call got an argument of the wrong type, range or size; nothing was written."""


class PayloadTooLargeError(InvalidArgumentError):
    """A serialized payload exceeds the configured maximum size."""


class ConfigurationError(RaftflowError):
    """A URL or an option that cannot work (unknown scheme, mismatched backends, ...)."""


class DatabaseError(RaftflowError):
    """The backend failed a request."""


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
    """The backend answered something that is not a valid response."""


class LeaseError(RaftflowError):
    """A Lease that cannot be used here: foreign to this transport, or already settled."""


class LeaseLostError(LeaseError):
    """The lease lapsed and another worker claimed (or settled) the message."""
