"""``python -m raftflow.transports.rqlite.local``: run a local cluster until Ctrl-C or SIGTERM.

    python -m raftflow.transports.rqlite.local --nodes 3 [--base-dir DIR] [--binary PATH]

``raftflow cluster`` runs the same :func:`main`.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from raftflow.transports.rqlite.local.cluster import LocalCluster
from raftflow.transports.rqlite.local.install import RqliteNotFoundError

from raftflow.errors import ClusterError

__all__ = ["main"]


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the block as Ctrl-C does (the cluster it runs is stopped cleanly)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m raftflow.transports.rqlite.local",
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
    with sigterm_as_interrupt():
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
        except (ClusterError, RqliteNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            cluster.stop()
    return 0
