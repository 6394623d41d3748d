"""Network cuts on loopback: a TCP proxy per rqlite node whose link can be cut and healed.

This machine has no iptables and the tests only ever use 127.0.0.1, so a cut between the
workers and one node is made by putting a proxy in front of each node's HTTP port and
handing the workers the proxies' URLs. rqlite's own traffic (Raft, and the forwarding of
a follower's requests to the leader) does not go through the proxies: only the clients'
link to a node is cut, which is the failure this module models.

Modes of a :class:`Proxy`:

- ``pass``: bytes flow both ways.
- ``refuse``: every open connection is reset, and new ones are refused by the kernel (the
  port stays bound but nothing listens on it) -- a dead host or a REJECT rule.
- ``blackhole``: connections are accepted and what the client sends is read, but nothing
  ever comes back and nothing is closed -- a DROP rule or a half-dead host, the nastiest
  case: only the client's own timeouts get it out.

    with ProxySet([node.http_port for node in cluster.nodes]) as proxies:
        url = proxies.url()                 # http://127.0.0.1:p1,127.0.0.1:p2,...
        proxies[0].set_mode("blackhole")
        ...
        proxies[0].set_mode("pass")
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Literal

from raftflow.transports.rqlite.local import pick_free_ports

HOST = "127.0.0.1"
Mode = Literal["pass", "refuse", "blackhole"]
MODES: tuple[Mode, ...] = ("pass", "refuse", "blackhole")
_CHUNK = 64 * 1024


def _reset(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a dead peer's kernel would answer."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One client connection and, while passing, its connection to the node."""

    def __init__(self, client: socket.socket, upstream: socket.socket | None) -> None:
        self.client = client
        self.upstream = upstream
        self.pending_to_upstream = b""
        self.pending_to_client = b""


class Proxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:target_port``; see the module doc."""

    def __init__(self, target_port: int, port: int, *, name: str = "") -> None:
        self.target_port = target_port
        self.port = port
        self.name = name or f"proxy:{port}->{target_port}"
        self.mode: Mode = "pass"
        self.accepted = 0  # connections accepted, in any mode
        self.refused_links = 0  # open connections reset by a switch to refuse
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._links: set[_Link] = set()
        self._listener: socket.socket | None = None
        self._holder: socket.socket | None = None  # bound, not listening: refuses
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._commands: list[tuple[Mode, threading.Event]] = []
        self._closed = False
        self._listen(self._bind())
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def set_mode(self, mode: Mode, timeout: float = 5.0) -> None:
        """Switch mode; returns once the proxy thread has applied it."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        done = threading.Event()
        with self._lock:
            self._commands.append((mode, done))
        self._wake_w.send(b"x")
        if not done.wait(timeout):
            raise RuntimeError(f"{self.name}: mode {mode!r} not applied within {timeout}s")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(5)
        for link in list(self._links):
            self._drop(link, reset=False)
        for sock in (self._listener, self._holder, self._wake_r, self._wake_w):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        self._selector.close()

    def __repr__(self) -> str:
        return f"Proxy({self.address} -> {HOST}:{self.target_port}, {self.mode})"

    # -- sockets --------------------------------------------------------------------------

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, self.port))
        return sock

    def _listen(self, sock: socket.socket) -> None:
        sock.listen(128)
        sock.setblocking(False)
        self._listener = sock
        self._selector.register(sock, selectors.EVENT_READ, ("accept", None))

    def _stop_listening(self) -> None:
        """Close the listener but keep the port bound (refused, and nobody else takes it)."""
        if self._listener is not None:
            self._selector.unregister(self._listener)
            self._listener.close()
            self._listener = None
        if self._holder is None:
            self._holder = self._bind()

    def _start_listening(self) -> None:
        if self._listener is not None:
            return
        holder, self._holder = self._holder, None
        self._listen(holder if holder is not None else self._bind())

    # -- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed:
            for key, events in self._selector.select(timeout=0.5):
                kind, link = key.data
                try:
                    if kind == "wake":
                        self._on_wake()
                    elif kind == "accept":
                        self._on_accept()
                    else:
                        self._on_io(link, key.fileobj, events)  # type: ignore[arg-type]
                except OSError:
                    if link is not None:
                        self._drop(link, reset=True)

    def _on_wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            self._wake_r.recv(1024)
        with self._lock:
            commands, self._commands = self._commands, []
        for mode, done in commands:
            self._apply(mode)
            done.set()

    def _apply(self, mode: Mode) -> None:
        previous, self.mode = self.mode, mode
        if mode == "refuse":
            for link in list(self._links):
                self.refused_links += 1
                self._drop(link, reset=True)
            self._stop_listening()
        elif mode == "blackhole":
            self._start_listening()
            for link in list(self._links):  # answers stop; the node side goes away
                self._close_upstream(link)
        else:
            self._start_listening()
            if previous == "blackhole":
                # Those clients saw nothing for a while; they have given up (timeouts).
                for link in list(self._links):
                    self._drop(link, reset=True)

    def _on_accept(self) -> None:
        assert self._listener is not None
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        self.accepted += 1
        client.setblocking(False)
        upstream = None
        if self.mode == "pass":
            upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            upstream.setblocking(False)
            code = upstream.connect_ex((HOST, self.target_port))
            if code not in (0, 115):  # EINPROGRESS
                upstream.close()
                _reset(client)  # the node is down: the client sees a reset
                return
        link = _Link(client, upstream)
        self._links.add(link)
        self._selector.register(client, selectors.EVENT_READ, ("client", link))
        if upstream is not None:
            self._selector.register(
                upstream, selectors.EVENT_READ | selectors.EVENT_WRITE, ("upstream", link)
            )

    def _on_io(self, link: _Link, sock: socket.socket, events: int) -> None:
        if link not in self._links:
            return
        if sock is link.client:
            if events & selectors.EVENT_READ:
                data = sock.recv(_CHUNK)
                if not data:
                    self._finish(link, link.upstream, link.pending_to_upstream)
                    return
                if self.mode == "pass" and link.upstream is not None:
                    link.pending_to_upstream += data
                # blackhole: read and forget
            if events & selectors.EVENT_WRITE and link.pending_to_client:
                sent = sock.send(link.pending_to_client)
                link.pending_to_client = link.pending_to_client[sent:]
        else:
            if events & selectors.EVENT_WRITE and link.pending_to_upstream:
                sent = sock.send(link.pending_to_upstream)
                link.pending_to_upstream = link.pending_to_upstream[sent:]
            if events & selectors.EVENT_READ:
                data = sock.recv(_CHUNK)
                if not data:
                    self._finish(link, link.client, link.pending_to_client)
                    return
                link.pending_to_client += data
        self._update_interest(link)

    def _update_interest(self, link: _Link) -> None:
        client_events = selectors.EVENT_READ
        if link.pending_to_client:
            client_events |= selectors.EVENT_WRITE
        self._selector.modify(link.client, client_events, ("client", link))
        if link.upstream is not None:
            upstream_events = selectors.EVENT_READ
            if link.pending_to_upstream:
                upstream_events |= selectors.EVENT_WRITE
            self._selector.modify(link.upstream, upstream_events, ("upstream", link))

    def _finish(self, link: _Link, other: socket.socket | None, pending: bytes) -> None:
        """One side closed: hand the other what is still owed to it, then close both."""
        if other is not None and pending:
            with contextlib.suppress(OSError):
                other.setblocking(True)
                other.settimeout(1.0)
                other.sendall(pending)
        self._drop(link, reset=False)

    def _close_upstream(self, link: _Link) -> None:
        if link.upstream is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(link.upstream)
            _reset(link.upstream)
            link.upstream = None
        link.pending_to_upstream = link.pending_to_client = b""
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.modify(link.client, selectors.EVENT_READ, ("client", link))

    def _drop(self, link: _Link, *, reset: bool) -> None:
        self._links.discard(link)
        for sock in (link.client, link.upstream):
            if sock is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            if reset:
                _reset(sock)
            else:
                with contextlib.suppress(OSError):
                    sock.close()
        link.upstream = None


class ProxySet:
    """One :class:`Proxy` per node HTTP port, on free loopback ports; closed on exit."""

    def __init__(self, target_ports: Sequence[int]) -> None:
        ports = pick_free_ports(len(target_ports), exclude=target_ports)
        self.proxies: list[Proxy] = []
        try:
            for i, (target, port) in enumerate(zip(target_ports, ports)):
                self.proxies.append(Proxy(target, port, name=f"netcut-{i}"))
        except BaseException:
            self.close()
            raise

    def url(self, shift: int = 0) -> str:
        """All proxies in one rqlite URL, starting with proxy ``shift``."""
        addresses = [p.address for p in self.proxies]
        shift %= len(addresses)
        return "http://" + ",".join(addresses[shift:] + addresses[:shift])

    @property
    def urls(self) -> list[str]:
        return [p.url for p in self.proxies]

    def heal(self) -> None:
        for proxy in self.proxies:
            proxy.set_mode("pass")

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.close()

    def __getitem__(self, index: int) -> Proxy:
        return self.proxies[index]

    def __iter__(self) -> Iterator[Proxy]:
        return iter(self.proxies)

    def __len__(self) -> int:
        return len(self.proxies)

    def __enter__(self) -> ProxySet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
