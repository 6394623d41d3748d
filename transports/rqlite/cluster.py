"""Run a real local rqlite cluster (1..n ``rqlited`` processes on 127.0.0.1) for tests,
demos and benchmarks.

    with LocalCluster(3) as cluster:
        leader = cluster.leader()
        cluster.kill(leader)            # SIGKILL, waits until the process is gone
        cluster.wait_ready()            # the two survivors elect a new leader
        cluster.start_node(leader)      # same data dir, same args: it rejoins and catches up

Every node of an n-node cluster is started with ``-bootstrap-expect n -join <all raft
addrs>``, so any node — or all of them — can be restarted with identical arguments and
rejoin from its data dir. Processes run in their own session, die with their parent
(``PR_SET_PDEATHSIG``, when started from the main thread) and are killed by an ``atexit``
hook if still running.

Command line (runs until Ctrl-C or SIGTERM)::

    python -m raftflow.transports.rqlite.cluster --nodes 3 [--base-dir DIR]

Exceptions::

    RuntimeError
     └── ClusterError             the cluster did not reach the state asked for in time
          └── NodeExitedError     an rqlited process we expected to run has exited (log tail inside)
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import importlib
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import httpx
from raftflow.transports.rqlite.runtime import RQLITE_VERSION, find_rqlited

__all__ = [
    "ClusterError",
    "DockerRqlite",
    "LocalCluster",
    "Node",
    "NodeExitedError",
    "kill_all_started",
    "started_pids",
]

HOST = "127.0.0.1"
LOG_NAME = "rqlited.log"
MANIFEST_NAME = "cluster.json"
_START_MARKER = "--- raftflow: starting"
_PORT_IN_USE_MARKERS = ("address already in use", "bind: address")


class ClusterError(RuntimeError):
    """The local cluster did not reach the state asked for (ready, a leader …) in time."""


class NodeExitedError(ClusterError):
    """An ``rqlited`` process that should be running has exited; the log tail is included."""

    def __init__(self, message: str, *, port_in_use: bool = False) -> None:
        super().__init__(message)
        self.port_in_use = port_in_use


# --------------------------------------------------------------------------- process registry
# Every rqlited started by this module, so that atexit and the pytest plugin can kill what is
# still alive. Only processes started by this Python process are ever signalled.

_registry_lock = threading.Lock()
_started: set[subprocess.Popen[bytes]] = set()
_atexit_registered = False


def _register(process: subprocess.Popen[bytes]) -> None:
    global _atexit_registered
    with _registry_lock:
        _started.add(process)
        if not _atexit_registered:
            atexit.register(kill_all_started)
            _atexit_registered = True


def _forget(process: subprocess.Popen[bytes]) -> None:
    with _registry_lock:
        _started.discard(process)


def started_pids() -> list[int]:
    """PIDs of the rqlited processes started by this Python process and still running."""
    with _registry_lock:
        return [p.pid for p in _started if p.poll() is None]


def kill_all_started() -> list[int]:
    """SIGKILL every rqlited this Python process started that is still running; reap them.

    Returns the PIDs that had to be killed.
    """
    with _registry_lock:
        processes = list(_started)
        _started.clear()
    killed = []
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            killed.append(process.pid)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
    return killed


# --------------------------------------------------------------------------- child setup

_PR_SET_PDEATHSIG = 1
_prctl: Callable[..., int] | None = None


def _load_prctl() -> Callable[..., int] | None:
    """Resolve libc's prctl in the parent: the child must not load libraries after fork."""
    global _prctl
    if _prctl is None and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _prctl = libc.prctl
        except (OSError, AttributeError):
            _prctl = None
    return _prctl


def _child_setup_factory() -> Callable[[], None] | None:
    """A preexec_fn that makes the child get SIGKILL when its parent dies.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process, so
    it is only used when starting from the main thread; nodes started from other threads rely on
    the atexit hook instead.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    prctl = _load_prctl()
    if prctl is None:
        return None
    parent_pid = os.getpid()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return setup


# --------------------------------------------------------------------------- ports


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_is_free(port: int) -> bool:
    """Can a listener bind ``port``? SO_REUSEADDR as in Go's net.Listen, so a port held only by
    TIME_WAIT connections (e.g. of a cluster just stopped) counts as free, a listening one not."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def pick_free_ports(count: int, *, exclude: Iterable[int] = ()) -> list[int]:
    """``count`` distinct ports that are free on 127.0.0.1 right now.

    They are drawn at random below the kernel's ephemeral range, so outgoing connections (which
    take ephemeral ports) cannot grab them between this check and rqlited's bind.
    """
    high = max(_ephemeral_low() - 1, 20000)
    low = 20000 if high > 21000 else 1024
    chosen: list[int] = []
    taken = set(exclude)
    rng = random.SystemRandom()
    for _ in range(count * 200):
        if len(chosen) == count:
            break
        port = rng.randint(low, high)
        if port not in taken and _port_is_free(port):
            chosen.append(port)
            taken.add(port)
    if len(chosen) < count:
        raise ClusterError(f"could not find {count} free ports on {HOST}")
    return chosen


# --------------------------------------------------------------------------- nodes


@dataclass(eq=False)
class Node:
    """One rqlited process of a :class:`LocalCluster` and everything needed to restart it."""

    node_id: str
    http_port: int
    raft_port: int
    data_dir: Path
    scheme: str = "http"
    args: list[str] = field(default_factory=list)
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False
    expected_running: bool = False

    @property
    def url(self) -> str:
        return f"{self.scheme}://{HOST}:{self.http_port}"

    @property
    def http_addr(self) -> str:
        return f"{HOST}:{self.http_port}"

    @property
    def raft_addr(self) -> str:
        return f"{HOST}:{self.raft_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def is_running(self) -> bool:
        """True while the process exists (a paused node is running)."""
        return self.process is not None and self.process.poll() is None

    def __repr__(self) -> str:
        state = "paused" if self.paused else ("running" if self.is_running() else "stopped")
        return f"Node({self.node_id!r}, {self.url}, pid={self.pid}, {state})"


def _wait_for_state(pid: int, *, stopped: bool, timeout: float = 5.0) -> None:
    """Wait until /proc says the process is (or is no longer) stopped by a signal."""
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = stat.read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return  # gone, or no /proc here: nothing to wait for
        if (state in ("T", "t")) == stopped:
            return
        time.sleep(0.005)
    raise ClusterError(f"pid {pid} did not {'stop' if stopped else 'continue'} in {timeout}s")


def _tail(path: Path, n: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:])


# --------------------------------------------------------------------------- cluster


class LocalCluster:
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
        self._client: httpx.Client | None = None

    # ------------------------------------------------------------------ context manager

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalCluster(size={self.size}, nodes={self.nodes!r})"

    # ------------------------------------------------------------------ properties

    @property
    def scheme(self) -> str:
        return "https" if self.http_cert is not None else "http"

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        if not self.nodes:
            raise ClusterError("cluster not started")
        return self.nodes[0].url

    @property
    def root(self) -> Path | None:
        """The folder holding the node data dirs (None before start / after a temp stop)."""
        return self._root

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start every node and wait until the cluster is ready (has an agreed leader).

        On a port collision during the first start the whole cluster is retried on new ports.
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
        saved_ports = self._load_manifest()
        if saved_ports is not None and not all(_port_is_free(p) for p in saved_ports):
            root, self._root = self._root, None
            raise ClusterError(
                f"the ports saved in {self._manifest_path()} ({saved_ports}) are not all free: "
                f"is a cluster still running on {root}?"
            )
        fresh = all(not (self._root / f"node{i + 1}").exists() for i in range(self.size))
        for attempt in range(1, self.start_attempts + 1):
            ports = saved_ports or pick_free_ports(2 * self.size)
            self.nodes = self._make_nodes(ports)
            self._save_manifest(ports)
            try:
                for node in self.nodes:
                    self._spawn(node)
                self.wait_ready(self.startup_timeout)
                return
            except NodeExitedError as exc:
                self._stop_processes(self.nodes)
                retry = exc.port_in_use and saved_ports is None and fresh
                if retry and attempt < self.start_attempts:
                    self._wipe_node_dirs()
                    continue
                self._cleanup_after_failed_start()
                if exc.port_in_use and saved_ports is not None:
                    raise NodeExitedError(
                        f"the ports saved in {self._manifest_path()} are taken: is a cluster "
                        f"still running on this base_dir?\n{exc}",
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
            if self._client is not None:
                self._client.close()
                self._client = None
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
                self._spawn(node)
        self.wait_ready(self.startup_timeout if timeout is None else timeout)

    def stop_node(self, node: Node, *, timeout: float | None = None) -> None:
        """Gracefully stop one node (SIGTERM; SIGKILL after ``timeout``)."""
        self._stop_processes([node], timeout=timeout)

    def kill(self, node: Node, sig: int = signal.SIGKILL, *, timeout: float | None = None) -> None:
        """Send ``sig`` to ``node`` and wait until the process is gone (SIGKILL after
        ``timeout`` if a catchable signal did not end it)."""
        if sig == signal.SIGKILL:
            node.expected_running = False
            process = node.process
            if process is not None and process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)
                process.wait(timeout=30)
            node.paused = False
            if process is not None:
                _forget(process)
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
        self._spawn(node)
        if wait:
            deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
            while True:
                self._check_alive([node])
                if self._readyz(node, deadline) and _served_by(node, self._status(node, deadline)):
                    return
                if time.monotonic() >= deadline:
                    raise ClusterError(
                        f"{node!r} did not become ready after restart\n{self._diagnostics([node])}"
                    )
                time.sleep(0.05)

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
        _wait_for_state(node.process.pid, stopped=True)

    def resume(self, node: Node) -> None:
        """Unfreeze ``node`` with SIGCONT; returns once it runs again."""
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGCONT)
            _wait_for_state(node.process.pid, stopped=False)
        node.paused = False

    # ------------------------------------------------------------------ state

    def running_nodes(self) -> list[Node]:
        """Nodes whose process runs and is not paused."""
        return [n for n in self.nodes if n.is_running() and not n.paused]

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until every running, unpaused node answers ``/readyz`` with 200 and all of them
        report the same leader, itself one of those nodes."""
        timeout = self.startup_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            active = self.running_nodes()
            self._check_alive(self.nodes)
            if active and all(self._readyz(n, deadline) for n in active):
                statuses = {n.node_id: self._status(n, deadline) for n in active}
                ours = all(_served_by(n, statuses[n.node_id]) for n in active)
                if ours and self._agreed_leader(active, statuses) is not None:
                    return
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"cluster not ready after {timeout}s"
                    f" (nodes: {self.nodes!r})\n{self._diagnostics(self.nodes)}"
                )
            time.sleep(0.05)

    def leader(self, timeout: float = 10.0) -> Node:
        """The node that is Raft leader and that every other running node names as leader.

        Polls each node's ``/status`` (not ``/nodes``, which can block on a dead node).
        """
        deadline = time.monotonic() + timeout
        last: dict[str, dict[str, Any] | None] = {}
        while True:
            active = self.running_nodes()
            self._check_alive(self.nodes)
            last = {n.node_id: self._status(n, deadline) for n in active}
            found = self._agreed_leader(active, last)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                summary = {
                    node_id: _leader_id(status) if status else "no answer"
                    for node_id, status in last.items()
                }
                raise ClusterError(
                    f"no agreed leader after {timeout}s; leader seen by each node: "
                    f"{summary}\n{self._diagnostics(self.nodes, n=15)}"
                )
            time.sleep(0.05)

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
        return _tail(node.log_path, n)

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
        args = [
            str(self.binary),
            "-node-id",
            node.node_id,
            "-http-addr",
            node.http_addr,
            "-raft-addr",
            node.raft_addr,
            "-raft-cluster-remove-shutdown=false",
        ]
        if self.size > 1:
            args += ["-bootstrap-expect", str(self.size), "-join", raft_addrs]
            if self.auth_file is not None and self.join_as is not None:
                args += ["-join-as", self.join_as]
        if self.auth_file is not None:
            args += ["-auth", str(self.auth_file)]
        if self.http_cert is not None and self.http_key is not None:
            args += ["-http-cert", str(self.http_cert), "-http-key", str(self.http_key)]
        args += self.extra_args
        args.append(str(node.data_dir))
        return args

    def _spawn(self, node: Node) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        with node.log_path.open("ab") as log:
            log.write(f"\n{_START_MARKER} {' '.join(node.args)}\n".encode())
            log.flush()
            process = subprocess.Popen(
                node.args,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_child_setup_factory(),
                close_fds=True,
            )
        _register(process)
        node.process = process
        node.paused = False
        node.expected_running = True

    def _stop_processes(
        self, nodes: Sequence[Node], *, sig: int = signal.SIGTERM, timeout: float | None = None
    ) -> None:
        """Signal all ``nodes`` at once, wait up to ``timeout``, SIGKILL what is left, reap."""
        timeout = self.stop_timeout if timeout is None else timeout
        live = []
        for node in nodes:
            node.expected_running = False
            process = node.process
            if process is None:
                continue
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)
                    if node.paused:
                        process.send_signal(signal.SIGCONT)
                live.append(process)
            node.paused = False
        deadline = time.monotonic() + timeout
        for process in live:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for node in nodes:
            if node.process is not None:
                _forget(node.process)

    def _check_alive(self, nodes: Iterable[Node]) -> None:
        """Raise NodeExitedError if a node we expect to run has exited."""
        for node in nodes:
            if node.expected_running and node.process is not None:
                code = node.process.poll()
                if code is not None:
                    node.expected_running = False
                    excerpt = self._run_log_excerpt(node)
                    in_use = any(m in excerpt.lower() for m in _PORT_IN_USE_MARKERS)
                    raise NodeExitedError(
                        f"rqlited {node.node_id} (pid {node.pid}) exited with code {code}; "
                        f"log {node.log_path}:\n{excerpt}",
                        port_in_use=in_use,
                    )

    def _http(self) -> httpx.Client:
        if self._client is None:
            verify: ssl.SSLContext | bool
            if isinstance(self.probe_verify, (bool, ssl.SSLContext)):
                verify = self.probe_verify
            else:
                verify = ssl.create_default_context(cafile=os.fspath(self.probe_verify))
            self._client = httpx.Client(auth=self.probe_auth, verify=verify)
        return self._client

    def _get(self, node: Node, path: str, deadline: float) -> httpx.Response | None:
        budget = min(1.0, max(0.05, deadline - time.monotonic()))
        try:
            response = self._http().get(node.url + path, timeout=budget)
        except httpx.HTTPError:
            return None
        if response.status_code == 401:
            raise ClusterError(
                f"{node.url}{path} answered 401: pass probe_auth=(user, password) of a user of "
                f"{self.auth_file} with the 'ready' and 'status' permissions"
            )
        return response

    def _readyz(self, node: Node, deadline: float) -> bool:
        response = self._get(node, "/readyz", deadline)
        return response is not None and response.status_code == 200

    def _status(self, node: Node, deadline: float) -> dict[str, Any] | None:
        response = self._get(node, "/status", deadline)
        if response is None or response.status_code != 200:
            return None
        try:
            data = response.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _agreed_leader(
        self, active: list[Node], statuses: dict[str, dict[str, Any] | None]
    ) -> Node | None:
        claims = [
            n
            for n in active
            if (status := statuses.get(n.node_id)) is not None
            and _raft_state(status) == "Leader"
            and _leader_id(status) == n.node_id
        ]
        if len(claims) != 1:
            return None
        leader = claims[0]
        for node in active:
            status = statuses.get(node.node_id)
            if status is None or _leader_id(status) != leader.node_id:
                return None
        return leader

    def _run_log_excerpt(self, node: Node, head: int = 5, tail: int = 30) -> str:
        """The log of the node's last run: whole if short, else its first and last lines
        (a usage error is printed first, followed by the whole flag list)."""
        text = _tail(node.log_path, 2000)
        marker = text.rfind(_START_MARKER)
        lines = text[marker:].splitlines()[1:] if marker >= 0 else text.splitlines()
        if len(lines) <= head + tail:
            return "\n".join(lines)
        skipped = len(lines) - head - tail
        return "\n".join([*lines[:head], f"[… {skipped} lines …]", *lines[-tail:]])

    def _diagnostics(self, nodes: Iterable[Node], n: int = 20) -> str:
        parts = []
        for node in nodes:
            parts.append(f"--- {node!r} log {node.log_path} (last {n} lines):")
            parts.append(self.log_tail(node, n))
        return "\n".join(parts)

    def _manifest_path(self) -> Path | None:
        return self.base_dir / MANIFEST_NAME if self.base_dir is not None else None

    def _load_manifest(self) -> list[int] | None:
        path = self._manifest_path()
        if path is None or not path.exists():
            return None
        try:
            data = json.loads(path.read_text())
            ports = [int(p) for p in data["ports"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"cannot read {path}: {exc}") from exc
        if data.get("size") != self.size or len(ports) != 2 * self.size:
            raise ClusterError(
                f"{path} describes a {data.get('size')}-node cluster, not {self.size} nodes; "
                "use another base_dir"
            )
        return ports

    def _save_manifest(self, ports: list[int]) -> None:
        path = self._manifest_path()
        if path is not None:
            path.write_text(json.dumps({"size": self.size, "ports": ports}) + "\n")

    def _wipe_node_dirs(self) -> None:
        for node in self.nodes:
            shutil.rmtree(node.data_dir, ignore_errors=True)

    def _cleanup_after_failed_start(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._temp_root and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
        self.nodes = []


def _served_by(node: Node, status: dict[str, Any] | None) -> bool:
    """True if ``status`` came from ``node``'s own process, not from whatever else may be
    listening on its port (``/status`` reports the server's ``os.pid``)."""
    os_info = status.get("os") if status is not None else None
    return isinstance(os_info, dict) and os_info.get("pid") == node.pid


def _raft_state(status: dict[str, Any]) -> str | None:
    store = status.get("store")
    raft = store.get("raft") if isinstance(store, dict) else None
    state = raft.get("state") if isinstance(raft, dict) else None
    return state if isinstance(state, str) else None


def _leader_id(status: dict[str, Any]) -> str | None:
    store = status.get("store")
    leader = store.get("leader") if isinstance(store, dict) else None
    node_id = leader.get("node_id") if isinstance(leader, dict) else None
    return node_id if isinstance(node_id, str) and node_id else None


# --------------------------------------------------------------------------- Docker fallback


class DockerRqlite:
    """One rqlite node in Docker (image ``rqlite/rqlite:8.26.8``), for machines without the
    binary. Needs ``pip install raftflow[docker]`` and a running Docker engine.

        with DockerRqlite() as node:
            httpx.get(node.url + "/readyz")
    """

    image = f"rqlite/rqlite:{RQLITE_VERSION}"

    def __init__(self, *, image: str | None = None, startup_timeout: float = 60.0) -> None:
        self.image = image or self.image
        self.startup_timeout = startup_timeout
        self._container: Any = None
        self.url = ""

    @staticmethod
    def available() -> bool:
        """True if testcontainers is installed and a Docker engine answers."""
        try:
            docker = importlib.import_module("docker")
            importlib.import_module("testcontainers.core.container")
        except ImportError:
            return False
        try:
            docker.from_env().ping()
        except Exception:
            return False
        return True

    def start(self) -> DockerRqlite:
        try:
            containers = importlib.import_module("testcontainers.core.container")
        except ImportError as exc:
            raise ClusterError(
                "DockerRqlite needs testcontainers: pip install 'raftflow[docker]'"
            ) from exc
        container = containers.DockerContainer(self.image).with_exposed_ports(4001)
        container.start()
        self._container = container
        host = container.get_container_host_ip()
        self.url = f"http://{host}:{container.get_exposed_port(4001)}"
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ClusterError(f"{self.image} not ready after {self.startup_timeout}s")

    def stop(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None

    def __enter__(self) -> DockerRqlite:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --------------------------------------------------------------------------- CLI


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m raftflow.transports.rqlite.cluster",
        description="Run a local rqlite cluster until Ctrl-C or SIGTERM.",
    )
    parser.add_argument("--nodes", type=int, default=3, help="number of nodes (default 3)")
    parser.add_argument(
        "--base-dir",
        type=Path,
        default=None,
        help="keep node data here (reused on the next run); default: a temp dir, removed",
    )
    parser.add_argument("--binary", type=Path, default=None, help="rqlited to run")
    args = parser.parse_args(argv)

    cluster = LocalCluster(args.nodes, binary=args.binary, base_dir=args.base_dir)
    with _sigterm_as_interrupt():
        try:
            started = time.monotonic()
            cluster.start()
            leader = cluster.leader()
            print(f"rqlite cluster ready in {time.monotonic() - started:.1f}s", flush=True)
            for node in cluster.nodes:
                role = "leader" if node is leader else "follower"
                print(f"{node.node_id}\t{node.url}\t{role}\tpid={node.pid}\t{node.data_dir}")
            print("Ctrl-C or SIGTERM stops the cluster.", flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopping …", file=sys.stderr, flush=True)
        except ClusterError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
