"""One rqlited process of a local cluster: its addresses, its log, starting and stopping it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from raftflow.transports.rqlite.local.ports import HOST
from raftflow.transports.rqlite.local.processes import forget, start_process

from raftflow.errors import ClusterError, NodeExitedError

__all__ = [
    "LOG_NAME",
    "Node",
    "check_alive",
    "diagnostics",
    "kill_node",
    "run_log_excerpt",
    "running_nodes",
    "spawn",
    "stop_nodes",
    "tail_lines",
    "wait_for_state",
]

LOG_NAME = "rqlited.log"
_START_MARKER = "--- raftflow: starting"
_PORT_IN_USE_MARKERS = ("address already in use", "bind: address")
#: Log lines that say why a node stopped, kept in an excerpt even from its middle.
_TELLING = re.compile(r"panic|fatal|failed|error|in use", re.IGNORECASE)


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


def running_nodes(nodes: Iterable[Node]) -> list[Node]:
    """The nodes of ``nodes`` whose process runs and is not paused."""
    return [n for n in nodes if n.is_running() and not n.paused]


def spawn(node: Node) -> None:
    """Start ``node``'s process with its arguments, appending its output to its log."""
    node.data_dir.mkdir(parents=True, exist_ok=True)
    with node.log_path.open("ab") as log:
        log.write(f"\n{_START_MARKER} {' '.join(node.args)}\n".encode())
        log.flush()
        node.process = start_process(node.args, log=log)
    node.paused = False
    node.expected_running = True


def stop_nodes(nodes: Sequence[Node], *, sig: int, timeout: float) -> None:
    """Signal all ``nodes`` at once, wait up to ``timeout``, SIGKILL what is left, reap."""
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
            forget(node.process)


def kill_node(node: Node) -> None:
    """SIGKILL ``node`` and wait until its process is gone."""
    node.expected_running = False
    process = node.process
    if process is not None and process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    node.paused = False
    if process is not None:
        forget(process)


def check_alive(nodes: Iterable[Node]) -> None:
    """Raise NodeExitedError if a node we expect to run has exited."""
    for node in nodes:
        if node.expected_running and node.process is not None:
            code = node.process.poll()
            if code is not None:
                node.expected_running = False
                excerpt = run_log_excerpt(node)
                # The whole run's log: a panic's goroutine dump pushes its first line (the
                # "bind: address already in use") out of the excerpt's head and tail.
                whole = "\n".join(run_log_lines(node)).lower()
                in_use = any(m in whole for m in _PORT_IN_USE_MARKERS)
                raise NodeExitedError(
                    f"rqlited {node.node_id} (pid {node.pid}) exited with code {code}; "
                    f"log {node.log_path}:\n{excerpt}",
                    port_in_use=in_use,
                )


def wait_for_state(pid: int, *, stopped: bool, timeout: float = 5.0) -> None:
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


def tail_lines(path: Path, n: int) -> str:
    """The last ``n`` lines of the file at ``path`` ("" if it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 256 * 1024))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:])


def run_log_lines(node: Node) -> list[str]:
    """The lines of the node's log written by its last run."""
    text = tail_lines(node.log_path, 2000)
    marker = text.rfind(_START_MARKER)
    return text[marker:].splitlines()[1:] if marker >= 0 else text.splitlines()


def run_log_excerpt(node: Node, head: int = 5, tail: int = 30) -> str:
    """The log of the node's last run: whole if short, else its first and last lines
    (a usage error is printed first, followed by the whole flag list), plus any line in
    between that says why it stopped (a panic, a fatal error)."""
    lines = run_log_lines(node)
    if len(lines) <= head + tail:
        return "\n".join(lines)
    middle = lines[head:-tail]
    telling = [line for line in middle if _TELLING.search(line)][:10]
    skipped = len(middle) - len(telling)
    return "\n".join([*lines[:head], *telling, f"[… {skipped} lines …]", *lines[-tail:]])


def diagnostics(nodes: Iterable[Node], n: int = 20) -> str:
    """The last ``n`` log lines of each of ``nodes``, for error messages."""
    parts = []
    for node in nodes:
        parts.append(f"--- {node!r} log {node.log_path} (last {n} lines):")
        parts.append(tail_lines(node.log_path, n))
    return "\n".join(parts)
