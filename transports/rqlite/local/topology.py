"""How raftflow's rqlite nodes and workers are started: the one source of their command lines.

Every way of running a cluster builds its ``rqlited`` arguments here or is checked against
them by ``tests/deploy/test_command_lines.py``: :class:`LocalCluster` (processes on
127.0.0.1), the testcontainers cluster, ``deploy/docker-compose.yml``, ``deploy/k8s/`` and
``deploy/rqlite@.service``. The rule they share: every node of an n-node cluster starts with
``-bootstrap-expect n -join <every node's raft address>``, so any node, or all of them, can
be restarted with the same arguments and rejoin from its data directory.

Nodes that bind ``0.0.0.0`` (containers, machines) must advertise a routable address
(``-http-adv-addr``/``-raft-adv-addr``), or rqlited exits with "advertised HTTP address is not
routable"; nodes on 127.0.0.1 advertise what they bind.

Workers are ``raftflow worker APP --concurrency N``; the URL, which may hold credentials,
comes from ``$RAFTFLOW_URL`` (a Secret, an env file), never from the command line where
``ps`` would show it.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "DATA_DIR",
    "HTTP_PORT",
    "RAFT_PORT",
    "RQLITED",
    "URL_VARIABLE",
    "rqlited_args",
    "served_node_args",
    "worker_args",
]

HTTP_PORT = 4001
RAFT_PORT = 4002
RQLITED = "/bin/rqlited"  # where both the official image and deploy/rqlite.Dockerfile put it
DATA_DIR = "/rqlite/file/data"  # under the images' VOLUME /rqlite/file
URL_VARIABLE = "RAFTFLOW_URL"


def rqlited_args(
    *,
    node_id: str,
    http_addr: str,
    raft_addr: str,
    data_dir: str,
    join: Sequence[str] = (),
    http_adv_addr: str | None = None,
    raft_adv_addr: str | None = None,
    auth_file: str | None = None,
    join_as: str | None = None,
    http_cert: str | None = None,
    http_key: str | None = None,
) -> list[str]:
    """The flags and data directory of one node (without the program path).

    ``join`` is every node's raft address, this one's included; with more than one the node
    waits for all of them (``-bootstrap-expect``) before the first election. ``join_as``
    (a user of ``auth_file`` with the ``join`` permission) is passed only with ``auth_file``.
    """
    if (http_cert is None) != (http_key is None):
        raise ValueError("http_cert and http_key go together")
    args = ["-node-id", node_id, "-http-addr", http_addr]
    if http_adv_addr is not None:
        args += ["-http-adv-addr", http_adv_addr]
    args += ["-raft-addr", raft_addr]
    if raft_adv_addr is not None:
        args += ["-raft-adv-addr", raft_adv_addr]
    if len(join) > 1:
        args += ["-bootstrap-expect", str(len(join)), "-join", ",".join(join)]
    if auth_file is not None:
        args += ["-auth", auth_file]
        if join_as is not None and len(join) > 1:
            args += ["-join-as", join_as]
    if http_cert is not None and http_key is not None:
        args += ["-http-cert", http_cert, "-http-key", http_key]
    args.append(data_dir)
    return args


def served_node_args(
    node_id: str,
    host: str,
    hosts: Sequence[str],
    *,
    data_dir: str = DATA_DIR,
    bind: str = "0.0.0.0",
    auth_file: str | None = None,
    join_as: str | None = None,
    http_cert: str | None = None,
    http_key: str | None = None,
) -> list[str]:
    """A node on its own host (container, pod, machine): it binds ``bind`` on the standard
    ports, advertises ``host`` and joins every host of ``hosts`` on the raft port."""
    return rqlited_args(
        node_id=node_id,
        http_addr=f"{bind}:{HTTP_PORT}",
        http_adv_addr=f"{host}:{HTTP_PORT}",
        raft_addr=f"{bind}:{RAFT_PORT}",
        raft_adv_addr=f"{host}:{RAFT_PORT}",
        join=[f"{h}:{RAFT_PORT}" for h in hosts],
        data_dir=data_dir,
        auth_file=auth_file,
        join_as=join_as,
        http_cert=http_cert,
        http_key=http_key,
    )


def worker_args(
    app: str,
    *,
    concurrency: int,
    program: str = "raftflow",
    ca_file: str | None = None,
) -> list[str]:
    """A worker's command line; its URL comes from ``$RAFTFLOW_URL``."""
    args = [program, "worker", app, "--concurrency", str(concurrency)]
    if ca_file is not None:
        args += ["--ca-file", ca_file]
    return args
