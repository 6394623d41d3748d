"""Run a real local rqlite cluster (1..n ``rqlited`` processes on 127.0.0.1) for tests,
demos and benchmarks.

    with LocalCluster(3) as cluster:
        leader = cluster.leader()
        cluster.kill(leader)            # SIGKILL, waits until the process is gone
        cluster.wait_ready()            # the two survivors elect a new leader
        cluster.start_node(leader)      # same data dir, same args: it rejoins and catches up

Every node of an n-node cluster is started with ``-bootstrap-expect n -join <all raft
addrs>``, so any node — or all of them — can be restarted with identical arguments and
rejoin from its data dir (the flags come from :mod:`.topology`, as do those of the
containers and of ``deploy/``). The processes are started and tracked by
:mod:`raftflow.transports.rqlite.local.processes`.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path

from raftflow.transports.rqlite.local.install import find_rqlited
from raftflow.transports.rqlite.local.lifecycle import ClusterBase
from raftflow.transports.rqlite.local.node import (
    Node,
    kill_node,
    running_nodes,
    spawn,
    stop_nodes,
    tail_lines,
    wait_for_state,
)
from raftflow.transports.rqlite.local.ports import (
    MANIFEST_NAME,
    load_ports,
    pick_free_ports,
    port_is_free,
    save_ports,
)
from raftflow.transports.rqlite.local.probe import Probe
from raftflow.transports.rqlite.local.topology import rqlited_args

from raftflow.errors import ClusterError, NodeExitedError

log = logging.getLogger("raftflow.rqlite.local")

__all__ = ["LocalCluster"]


class LocalCluster(ClusterBase):
    """A cluster of ``size`` rqlited processes on 127.0.0.1, as a context manager.

    ``base_dir``: where the node data dirs go (``<base_dir>/<node_id>``); kept on stop. Without
    it a temporary folder is used and removed on :meth:`stop`. The ports are saved in
    ``<base_dir>/cluster.json`` so a later cluster on the same ``base_dir`` reuses them and its
    nodes rejoin from their data.

    ``auth_file`` is passed as ``-auth``; ``probe_auth=(user, password)`` is then used for this
    class's own probes (and its user for ``-join-as`` unless ``join_as`` is given).
    ``http_cert``/``http_key`` switch the HTTP API to https; ``probe_verify`` is the CA file
    (or SSL context, or False) the probes verify the server with.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        binary: str | os.PathLike[str] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        auth_file: str | os.PathLike[str] | None = None,
        probe_auth: tuple[str, str] | None = None,
        join_as: str | None = None,
        http_cert: str | os.PathLike[str] | None = None,
        http_key: str | os.PathLike[str] | None = None,
        probe_verify: str | os.PathLike[str] | ssl.SSLContext | bool = True,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        start_attempts: int = 3,
    ) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        if (http_cert is None) != (http_key is None):
            raise ValueError("http_cert and http_key go together")
        self.size = size
        self.binary = Path(binary) if binary is not None else None
        self.base_dir = Path(base_dir).resolve() if base_dir is not None else None
        self.auth_file = Path(auth_file).resolve() if auth_file is not None else None
        self.probe_auth = probe_auth
        self.join_as = join_as if join_as is not None else (probe_auth[0] if probe_auth else None)
        self.http_cert = Path(http_cert).resolve() if http_cert is not None else None
        self.http_key = Path(http_key).resolve() if http_key is not None else None
        self.probe_verify = probe_verify
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.start_attempts = start_attempts
        self.nodes: list[Node] = []
        self._root: Path | None = None
        self._temp_root = False
        self._prober: Probe | None = None

    # ------------------------------------------------------------------ context manager

    def __repr__(self) -> str:
        return f"LocalCluster(size={self.size}, nodes={self.nodes!r})"

    # ------------------------------------------------------------------ properties

    @property
    def scheme(self) -> str:
        return "https" if self.http_cert is not None else "http"

    @property
    def root(self) -> Path | None:
        """The folder holding the node data dirs (None before start / after a temp stop)."""
        return self._root

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start every node and wait until the cluster is ready (has an agreed leader).

        When a node exits during the first start the whole cluster is retried on new ports.
        """
        if self.nodes:
            raise ClusterError("cluster already started; use start_all_nodes() to restart it")
        binary = self.binary if self.binary is not None else find_rqlited()
        self.binary = binary
        if self.base_dir is not None:
            self.base_dir.mkdir(parents=True, exist_ok=True)
            self._root, self._temp_root = self.base_dir, False
        else:
            self._root = Path(tempfile.mkdtemp(prefix="raftflow-rqlite-"))
            self._temp_root = True
        saved_ports = load_ports(self.base_dir, self.size)
        if saved_ports is not None and not all(port_is_free(p) for p in saved_ports):
            root, self._root = self._root, None
            raise ClusterError(
                f"the ports saved in {self.base_dir}/{MANIFEST_NAME} ({saved_ports}) are not all "
                f"free: "
                f"is a cluster still running on {root}?"
            )
        fresh = all(not (self._root / f"node{i + 1}").exists() for i in range(self.size))
        for attempt in range(1, self.start_attempts + 1):
            ports = saved_ports or pick_free_ports(2 * self.size)
            self.nodes = self._make_nodes(ports)
            save_ports(self.base_dir, self.size, ports)
            try:
                for node in self.nodes:
                    spawn(node)
                self.wait_ready(self.startup_timeout)
                return
            except NodeExitedError as exc:
                self._stop_processes(self.nodes)
                # A fresh cluster is retried on new ports whatever stopped a node: mostly a
                # port another process took between our pick and rqlited's bind, but a rare
                # crash of rqlited while its nodes first find each other was seen too.
                retry = saved_ports is None and fresh
                if retry and attempt < self.start_attempts:
                    log.warning("a node exited while the cluster started; retrying: %s", exc)
                    self._wipe_node_dirs()
                    continue
                self._cleanup_after_failed_start()
                if exc.port_in_use and saved_ports is not None:
                    raise NodeExitedError(
                        f"the ports saved in {self.base_dir}/{MANIFEST_NAME} are taken: is a "
                        f"cluster still running on this base_dir?\n{exc}",
                        port_in_use=True,
                    ) from exc
                raise
            except BaseException:
                self._stop_processes(self.nodes)
                self._cleanup_after_failed_start()
                raise

    def stop(self) -> None:
        """Stop every node (SIGTERM, then SIGKILL after ``stop_timeout``) and reap it.

        Removes the temporary data folder if this cluster created it. Safe to call twice.
        """
        try:
            self._stop_processes(self.nodes)
        finally:
            self._close_probe()
            if self._temp_root and self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None
            self.nodes = []

    def stop_all_nodes(self) -> None:
        """Stop every node but keep the data dirs (see :meth:`start_all_nodes`)."""
        self._stop_processes(self.nodes)

    def start_all_nodes(self, *, timeout: float | None = None) -> None:
        """Start every stopped node from its data dir and wait until the cluster is ready."""
        for node in self.nodes:
            if not node.is_running():
                spawn(node)
        self.wait_ready(self.startup_timeout if timeout is None else timeout)

    def stop_node(self, node: Node, *, timeout: float | None = None) -> None:
        """Gracefully stop one node (SIGTERM; SIGKILL after ``timeout``)."""
        self._stop_processes([node], timeout=timeout)

    def kill(self, node: Node, sig: int = signal.SIGKILL, *, timeout: float | None = None) -> None:
        """Send ``sig`` to ``node`` and wait until the process is gone (SIGKILL after
        ``timeout`` if a catchable signal did not end it)."""
        if sig == signal.SIGKILL:
            kill_node(node)
        else:
            self._stop_processes([node], sig=sig, timeout=timeout)

    def start_node(self, node: Node, *, wait: bool = True, timeout: float | None = None) -> None:
        """Start a stopped or killed node again with its data dir and original arguments.

        With ``wait`` it returns once that node's ``/readyz`` answers 200 (it has rejoined and
        knows the leader); pass ``wait=False`` when the cluster has no quorum without it.
        """
        if node not in self.nodes:
            raise ValueError(f"{node!r} is not a node of this cluster")
        if node.is_running():
            raise ClusterError(f"{node!r} is already running")
        spawn(node)
        if wait:
            self._probe().wait_node_ready(
                node, self.startup_timeout if timeout is None else timeout
            )

    def restart(self, node: Node, *, wait: bool = True, timeout: float | None = None) -> None:
        """Gracefully stop ``node`` and start it again."""
        self.stop_node(node)
        self.start_node(node, wait=wait, timeout=timeout)

    def pause(self, node: Node) -> None:
        """Freeze ``node`` with SIGSTOP (a hung but alive process); returns once it is."""
        if not node.is_running() or node.process is None:
            raise ClusterError(f"{node!r} is not running")
        node.process.send_signal(signal.SIGSTOP)
        node.paused = True
        wait_for_state(node.process.pid, stopped=True)

    def resume(self, node: Node) -> None:
        """Unfreeze ``node`` with SIGCONT; returns once it runs again."""
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGCONT)
            wait_for_state(node.process.pid, stopped=False)
        node.paused = False

    # ------------------------------------------------------------------ state

    def running_nodes(self) -> list[Node]:
        """Nodes whose process runs and is not paused."""
        return running_nodes(self.nodes)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until every running, unpaused node answers ``/readyz`` with 200 and all of them
        report the same leader, itself one of those nodes."""
        self._probe().wait_ready(self.nodes, self.startup_timeout if timeout is None else timeout)

    def leader(self, timeout: float = 10.0) -> Node:
        """The node that is Raft leader and that every other running node names as leader.

        Polls each node's ``/status`` (not ``/nodes``, which can block on a dead node).
        """
        return self._probe().leader(self.nodes, timeout)

    def followers(self, timeout: float = 10.0) -> list[Node]:
        """Running, unpaused nodes other than the leader."""
        leader = self.leader(timeout)
        return [n for n in self.running_nodes() if n is not leader]

    def node(self, node_id: str) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(node_id)

    def log_tail(self, node: Node, n: int = 50) -> str:
        """The last ``n`` lines of ``node``'s rqlited log."""
        return tail_lines(node.log_path, n)

    # ------------------------------------------------------------------ internals

    def _make_nodes(self, ports: list[int]) -> list[Node]:
        assert self._root is not None
        nodes = []
        for i in range(self.size):
            node = Node(
                node_id=f"node{i + 1}",
                http_port=ports[2 * i],
                raft_port=ports[2 * i + 1],
                data_dir=self._root / f"node{i + 1}",
                scheme=self.scheme,
            )
            nodes.append(node)
        raft_addrs = ",".join(n.raft_addr for n in nodes)
        for node in nodes:
            node.args = self._node_args(node, raft_addrs)
        return nodes

    def _node_args(self, node: Node, raft_addrs: str) -> list[str]:
        args = rqlited_args(
            node_id=node.node_id,
            http_addr=node.http_addr,
            raft_addr=node.raft_addr,
            join=raft_addrs.split(",") if self.size > 1 else (),
            data_dir=str(node.data_dir),
            auth_file=str(self.auth_file) if self.auth_file is not None else None,
            join_as=self.join_as,
            http_cert=str(self.http_cert) if self.http_cert is not None else None,
            http_key=str(self.http_key) if self.http_key is not None else None,
        )
        data_dir = args.pop()
        return [
            str(self.binary),
            *args,
            "-raft-cluster-remove-shutdown=false",
            *self.extra_args,
            data_dir,
        ]

    def _stop_processes(
        self, nodes: Sequence[Node], *, sig: int = signal.SIGTERM, timeout: float | None = None
    ) -> None:
        """Signal all ``nodes`` at once, wait up to ``timeout``, SIGKILL what is left, reap."""
        stop_nodes(nodes, sig=sig, timeout=self.stop_timeout if timeout is None else timeout)

    def _probe(self) -> Probe:
        if self._prober is None:
            self._prober = Probe(
                auth=self.probe_auth, verify=self.probe_verify, auth_file=self.auth_file
            )
        return self._prober

    def _close_probe(self) -> None:
        if self._prober is not None:
            self._prober.close()
            self._prober = None

    def _wipe_node_dirs(self) -> None:
        for node in self.nodes:
            shutil.rmtree(node.data_dir, ignore_errors=True)

    def _cleanup_after_failed_start(self) -> None:
        self._close_probe()
        if self._temp_root and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
        self.nodes = []
