"""The TCP ports of a local cluster on 127.0.0.1: picking free ones, remembering them.

A cluster with a ``base_dir`` saves its ports in ``<base_dir>/cluster.json``, so that a later
cluster on the same ``base_dir`` reuses them and its nodes rejoin from their data (their Raft
configuration names those addresses).
"""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Iterable
from pathlib import Path

from raftflow.errors import ClusterError

__all__ = ["HOST", "MANIFEST_NAME", "load_ports", "pick_free_ports", "port_is_free", "save_ports"]

HOST = "127.0.0.1"
MANIFEST_NAME = "cluster.json"


def _ephemeral_low() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_is_free(port: int) -> bool:
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
        if port not in taken and port_is_free(port):
            chosen.append(port)
            taken.add(port)
    if len(chosen) < count:
        raise ClusterError(f"could not find {count} free ports on {HOST}")
    return chosen


def load_ports(base_dir: Path | None, size: int) -> list[int] | None:
    """The ports saved for a ``size``-node cluster in ``base_dir``, or None if none were."""
    if base_dir is None:
        return None
    path = base_dir / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        ports = [int(p) for p in data["ports"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"cannot read {path}: {exc}") from exc
    if data.get("size") != size or len(ports) != 2 * size:
        raise ClusterError(
            f"{path} describes a {data.get('size')}-node cluster, not {size} nodes; "
            "use another base_dir"
        )
    return ports


def save_ports(base_dir: Path | None, size: int, ports: list[int]) -> None:
    """Remember the ports of a ``size``-node cluster in ``base_dir`` (if there is one)."""
    if base_dir is not None:
        path = base_dir / MANIFEST_NAME
        path.write_text(json.dumps({"size": size, "ports": ports}) + "\n")
