"""A local rqlite harness for tests, demos and benchmarks: not part of the product's runtime.

It installs the pinned ``rqlited`` 8.26.8 and runs real clusters of it on 127.0.0.1::

    from raftflow.transports.rqlite.local import LocalCluster

    with LocalCluster(3) as cluster:
        leader = cluster.leader()
        cluster.kill(leader)
        cluster.wait_ready()

Modules, one job each:

- ``install``: find ``rqlited`` or install it (standard library only; runs by path);
- ``processes``: start child processes, track them, kill the leftovers;
- ``ports``: free ports on 127.0.0.1, and the ports a ``base_dir`` remembers;
- ``node``: one ``rqlited`` process (:class:`Node`), its log, starting and stopping it;
- ``probe``: ``/readyz`` and ``/status``, waiting for readiness and an agreed leader;
- ``cluster``: :class:`LocalCluster`;
- ``topology``: the command lines of nodes and workers, shared with ``deploy/``;
- ``containers``: :class:`RqliteContainer` and :class:`RqliteClusterContainers`, the same
  nodes in Docker through testcontainers (``pip install raftflow[docker]``; import it from
  its module: it needs the extra);
- ``pytest_plugin``: the fixtures (pytest entry point ``raftflow_rqlite``);
- ``container_fixtures``: their container twins (pytest entry point ``raftflow_rqlite_docker``);
- ``cli`` / ``__main__``: ``python -m raftflow.transports.rqlite.local`` runs a cluster until
  Ctrl-C (as does ``raftflow cluster``).

Its errors are branches of raftflow's tree (:mod:`raftflow.errors`)::

    RaftflowError
    ├── ConfigurationError
    │   └── RqliteNotFoundError (FileNotFoundError)  no usable rqlited in the search order
    ├── RqliteInstallError                           unsupported platform, download or
    │                                                integrity failure
    └── ClusterError                                 the cluster did not reach the state asked
        │                                            for (ready, a leader …) in time
        └── NodeExitedError                          an rqlited that should run has exited
                                                     (its log tail is in the message)
"""

from raftflow.transports.rqlite.local.cluster import LocalCluster
from raftflow.transports.rqlite.local.install import (
    RQLITE_VERSION,
    RqliteInstallError,
    RqliteNotFoundError,
    default_install_dir,
    find_rqlited,
    install_rqlite,
    rqlited_version,
)
from raftflow.transports.rqlite.local.node import Node
from raftflow.transports.rqlite.local.ports import pick_free_ports
from raftflow.transports.rqlite.local.processes import kill_all_started, started_pids

from raftflow.errors import ClusterError, NodeExitedError

__all__ = [
    "RQLITE_VERSION",
    "ClusterError",
    "LocalCluster",
    "Node",
    "NodeExitedError",
    "RqliteInstallError",
    "RqliteNotFoundError",
    "default_install_dir",
    "find_rqlited",
    "install_rqlite",
    "kill_all_started",
    "pick_free_ports",
    "rqlited_version",
    "started_pids",
]
