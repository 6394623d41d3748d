"""The errors of the local cluster (the installer's own are in :mod:`.install`)."""

from __future__ import annotations

from raftflow.transports.errors import RaftflowError

__all__ = ["ClusterError", "NodeExitedError"]


class ClusterError(RaftflowError):
    """The local cluster did not reach the state asked for (ready, a leader …) in time."""


class NodeExitedError(ClusterError):
    """An ``rqlited`` process that should be running has exited; the log tail is included."""

    def __init__(self, message: str, *, port_in_use: bool = False) -> None:
        super().__init__(message)
        self.port_in_use = port_in_use
