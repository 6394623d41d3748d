"""A 3-node rqlite cluster whose nodes live in their own Linux network namespaces.

Each node ``i`` runs in namespace ``<tag>n<i>`` with two links, each a veth pair to a bridge
in the root namespace:

- ``raft`` (10.<a>.<b>.i): Raft and rqlite's node-to-node service (forwarding to the
  leader) -- only the nodes are on this bridge;
- ``http`` (10.<a>.<b+1>.i): the HTTP API -- the bridge has an address in the root
  namespace, where the workers and the test run.

Cutting a node's raft link (``ip link set <veth> down`` on the root side) isolates it from
the other nodes while the workers still reach it: a real partition of the Raft cluster,
which the loopback proxy of :mod:`tests.chaos.netcut` cannot make. Needs root and iproute2
(:func:`unavailable` says why not, for a clean skip).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from raftflow.transports.rqlite.local.topology import rqlited_args

HTTP_PORT = 4001
RAFT_PORT = 4002


def _ip(
    *args: str, netns: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    command = ["ip", *args] if netns is None else ["ip", "netns", "exec", netns, "ip", *args]
    return subprocess.run(command, capture_output=True, text=True, check=check, timeout=30)


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they can."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (run as root, as CI does)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is missing (apt-get install iproute2; `make engines` does)"
    probe = f"rfprobe{os.getpid() % 100000}"
    try:
        _ip("netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return f"cannot create a network namespace: {detail.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class NsNode:
    index: int
    netns: str
    raft_ip: str
    http_ip: str
    raft_veth: str  # its root-namespace end: down = the node is cut from the other nodes
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.http_ip}:{HTTP_PORT}"

    @property
    def node_id(self) -> str:
        return f"node{self.index}"


class NamespaceCluster:
    def __init__(self, binary: Path, root: Path, size: int = 3) -> None:
        self.binary = binary
        self.root = root
        self.tag = f"rf{os.getpid() % 10000}{random.randrange(100):02d}"
        a, b = 10, 100 + 2 * random.randrange(70)
        self.raft_net, self.http_net = f"{a}.{b}", f"{a}.{b + 1}"
        self.raft_bridge = f"{self.tag}rb"
        self.http_bridge = f"{self.tag}hb"
        self.nodes = [
            NsNode(
                i,
                f"{self.tag}n{i}",
                f"10.{self.raft_net}.{i}",
                f"10.{self.http_net}.{i}",
                f"{self.tag}r{i}",
                root / f"node{i}",
                root / f"node{i}.log",
            )
            for i in range(1, size + 1)
        ]
        self._made: list[tuple[str, ...]] = []
        self._rules: list[tuple[str, ...]] = []  # iptables rules to delete on close

    # -- setup and teardown ----------------------------------------------------------------

    def __enter__(self) -> NamespaceCluster:
        try:
            self._network()
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _network(self) -> None:
        for bridge in (self.raft_bridge, self.http_bridge):
            _ip("link", "add", bridge, "type", "bridge")
            self._made.append(("link", "del", bridge))
            _ip("link", "set", bridge, "up")
            # A Docker engine on the machine sets the FORWARD policy to DROP, and with
            # br_netfilter that drops traffic between two ports of our bridge too.
            if shutil.which("iptables"):
                rule = ("FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT")
                subprocess.run(["iptables", "-w", "-I", *rule], capture_output=True, timeout=30)
                self._rules.append(rule)
        _ip("addr", "add", f"10.{self.http_net}.254/24", "dev", self.http_bridge)
        for node in self.nodes:
            _ip("netns", "add", node.netns)
            self._made.append(("netns", "del", node.netns))
            _ip("link", "set", "lo", "up", netns=node.netns)
            for kind, bridge, ip in (
                ("r", self.raft_bridge, node.raft_ip),
                ("h", self.http_bridge, node.http_ip),
            ):
                outer = f"{self.tag}{kind}{node.index}"
                inner = f"eth{kind}"
                _ip(
                    "link", "add", outer, "type", "veth", "peer", "name", inner, "netns", node.netns
                )
                _ip("link", "set", outer, "master", bridge, "up")
                _ip("addr", "add", f"{ip}/24", "dev", inner, netns=node.netns)
                _ip("link", "set", inner, "up", netns=node.netns)

    def _start(self) -> None:
        join = [f"{n.raft_ip}:{RAFT_PORT}" for n in self.nodes]
        for node in self.nodes:
            node.data_dir.mkdir(parents=True, exist_ok=True)
            args = rqlited_args(
                node_id=node.node_id,
                http_addr=f"{node.http_ip}:{HTTP_PORT}",
                raft_addr=f"{node.raft_ip}:{RAFT_PORT}",
                join=join,
                data_dir=str(node.data_dir),
            )
            command = ["ip", "netns", "exec", node.netns, str(self.binary), *args]
            log = node.log_path.open("ab")
            node.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
            log.close()
        self.wait_ready(60.0)

    def close(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()
                try:
                    node.process.wait(10)
                except subprocess.TimeoutExpired:
                    node.process.kill()
                    node.process.wait(10)
        for args in reversed(self._made):
            _ip(*args, check=False)
        self._made.clear()
        for rule in self._rules:
            subprocess.run(["iptables", "-w", "-D", *rule], capture_output=True, timeout=30)
        self._rules.clear()

    # -- state ---------------------------------------------------------------------------

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def status(self, node: NsNode) -> dict[str, object] | None:
        with contextlib.suppress(httpx.HTTPError, ValueError):
            reply = httpx.get(node.url + "/status", timeout=1.0)
            if reply.status_code == 200:
                data: dict[str, object] = reply.json()
                return data
        return None

    def leader(self, timeout: float = 30.0) -> NsNode:
        """The node the majority follows (asked of every node; the cut one may lag)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            votes: dict[str, int] = {}
            for node in self.nodes:
                status = self.status(node) or {}
                leader = (status.get("store") or {}).get("leader") or {}  # type: ignore[union-attr]
                address = leader.get("addr") if isinstance(leader, dict) else None
                if address:
                    votes[address] = votes.get(address, 0) + 1
            for address, count in votes.items():
                if count >= 2:
                    for node in self.nodes:
                        if address.startswith(node.raft_ip + ":"):
                            return node
            time.sleep(0.2)
        raise TimeoutError("no leader that a majority agrees on")

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = 0
            for node in self.nodes:
                with contextlib.suppress(httpx.HTTPError):
                    reply = httpx.get(node.url + "/readyz", timeout=1.0)
                    ready += reply.status_code == 200
            if ready == len(self.nodes):
                with contextlib.suppress(TimeoutError):
                    self.leader(5.0)
                    return
            for node in self.nodes:
                if node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(
                        f"{node.node_id} exited: {node.log_path.read_text()[-2000:]}"
                    )
            time.sleep(0.3)
        raise TimeoutError("the namespace cluster did not become ready")

    # -- the faults ----------------------------------------------------------------------

    def cut(self, node: NsNode) -> None:
        """Cut ``node`` from the other nodes (its raft link); the workers still reach it."""
        _ip("link", "set", node.raft_veth, "down")

    def heal(self, node: NsNode) -> None:
        _ip("link", "set", node.raft_veth, "up")

    def heal_all(self) -> None:
        for node in self.nodes:
            self.heal(node)

    @contextlib.contextmanager
    def cut_for(self, node: NsNode) -> Iterator[None]:
        self.cut(node)
        try:
            yield
        finally:
            self.heal(node)
