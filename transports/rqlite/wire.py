"""HTTP/1.1 to rqlite's nodes on our own keep-alive sockets, framed by h11.

Every request raftflow makes is one small JSON POST (or a GET of ``/status``) to a node it
already knows, and at concurrency 1 a step waits for one such request. A general-purpose
client pays for what that never uses -- cookies, auth and redirect flows, URL merging,
``anyio`` under asyncio -- on every request: measured on this 2-core VM, ``httpx``'s async
client spent 1.5-1.9 ms of CPU per single-row INSERT, and 1.2-2.8 ms more wall time per
request than the same request framed by h11 on asyncio streams (0.4-0.6 ms of CPU), in
alternating runs against one cluster (docs/performance.md, "The HTTP client"). At one
execution at a time that is 6 requests per 5-step workflow: a quarter of its time.

This is where raftflow deviates from the spec, which names ``httpx.AsyncClient`` for the
async twin: the semantics of a request are the same (one POST, the same failure
classification: ``sent`` is false only when no connection was made), and ``http="httpx"``
still selects it. h11 parses and frames the messages (chunked bodies, keep-alive, a
server's ``Connection: close``); what is ours is the pool and the sockets:

- A connection serves one request at a time; an idle one is reused (most recent first)
  unless the server has closed it or sent something unasked, which is checked before
  reuse so a node that restarted costs no failed request.
- A request that is cancelled, times out or fails closes its connection: a connection is
  back in the pool only after a complete response, so a late reply can never be read as
  the answer to the next request.
- ``timeout`` bounds the whole attempt: connect, TLS, send and the full response.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar
from urllib.parse import urlencode, urlsplit

import h11
from raftflow.transports.rqlite.protocol import HttpCall, HttpReply, NetworkFailure, RqliteConfig

L = TypeVar("L")

#: Idle connections kept per node (more are closed when they come back).
MAX_IDLE = 20
_READ_SIZE = 65536


@dataclass(frozen=True)
class Origin:
    """Where a node listens: ``http://host:port`` parsed once."""

    tls: bool
    host: str
    port: int
    host_header: str


@lru_cache(maxsize=64)
def origin_of(node: str) -> Origin:
    parts = urlsplit(node)
    tls = parts.scheme == "https"
    host = parts.hostname or ""
    port = parts.port or (443 if tls else 80)
    return Origin(tls, host, port, parts.netloc.rsplit("@", 1)[-1])


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The context of ``https`` nodes: the system CAs, a CA bundle, or no check at all."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)


class Framing:
    """One connection's HTTP/1.1 state (h11's, sans I/O): the bytes of a request, then
    the reply assembled from what the socket reads."""

    def __init__(self) -> None:
        self._h11 = h11.Connection(h11.CLIENT)
        self._status = 0
        self._served_by: str | None = None
        self._body: list[bytes] = []

    def request(self, call: HttpCall, origin: Origin, authorization: bytes | None) -> bytes:
        target = call.path + ("?" + urlencode(call.params) if call.params else "")
        headers = [(b"Host", origin.host_header.encode())]
        if authorization is not None:
            headers.append((b"Authorization", authorization))
        if call.body is None:
            return self._h11.send(h11.Request(method="GET", target=target, headers=headers)) + (
                self._h11.send(h11.EndOfMessage()) or b""
            )
        headers += [
            (b"Content-Type", b"application/json"),
            (b"Content-Length", str(len(call.body)).encode()),
        ]
        start = self._h11.send(h11.Request(method="POST", target=target, headers=headers))
        body = self._h11.send(h11.Data(data=call.body))
        end = self._h11.send(h11.EndOfMessage())
        return (start or b"") + (body or b"") + (end or b"")

    def feed(self, data: bytes) -> HttpReply | None:
        """The reply once ``data`` completes it (``b""``: the server closed the
        connection); None while more is needed. h11's errors say the reply is broken."""
        self._h11.receive_data(data)
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                if not data:  # closed before the reply was complete
                    raise h11.RemoteProtocolError("connection closed mid-reply")
                return None
            if isinstance(event, h11.Response):
                self._status = event.status_code
                for name, value in event.headers:
                    if name == b"x-rqlite-served-by":
                        self._served_by = value.decode("latin-1")
            elif isinstance(event, h11.Data):
                self._body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return HttpReply(self._status, b"".join(self._body), self._served_by)
            elif isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("connection closed mid-reply")
            # h11.InformationalResponse (100 Continue): nothing to keep

    def next_cycle(self) -> bool:
        """Ready the connection for another request; False if it must be closed."""
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            self._status, self._served_by, self._body = 0, None, []
            return True
        return False


def _authorization(config: RqliteConfig) -> bytes | None:
    if config.auth is None:
        return None
    user, password = config.auth
    return b"Basic " + base64.b64encode(f"{user}:{password}".encode())


def _failure(exc: BaseException, *, sent: bool) -> NetworkFailure:
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    untrusted = isinstance(exc, ssl.SSLCertVerificationError)
    return NetworkFailure(sent=sent and not untrusted, detail=detail, untrusted=untrusted)


class _Pool(Generic[L]):
    """Idle connections by node, most recently used first; thread-safe."""

    def __init__(self, is_fresh: Callable[[L], bool], close: Callable[[L], None]) -> None:
        self._idle: dict[str, list[L]] = {}
        self._lock = threading.Lock()
        self._is_fresh = is_fresh
        self._close = close
        self.closed = False

    def take(self, node: str) -> L | None:
        while True:
            with self._lock:
                links = self._idle.get(node)
                if not links:
                    return None
                link = links.pop()
            if self._is_fresh(link):
                return link
            self._close(link)

    def put(self, node: str, link: L) -> None:
        with self._lock:
            links = self._idle.setdefault(node, [])
            if not self.closed and len(links) < MAX_IDLE:
                links.append(link)
                return
        self._close(link)

    def drain(self) -> list[L]:
        with self._lock:
            self.closed = True
            links = [link for node_links in self._idle.values() for link in node_links]
            self._idle.clear()
        return links


# ----------------------------------------------------------------------------------- sync


@dataclass
class _SocketLink:
    sock: socket.socket
    framing: Framing


def _socket_is_fresh(link: _SocketLink) -> bool:
    """No EOF or unasked bytes waiting: the server has not closed it."""
    try:
        readable, _, _ = select.select([link.sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _close_socket(link: _SocketLink) -> None:
    with contextlib.suppress(OSError):
        link.sock.close()


class SyncWire:
    """The sync driver: blocking sockets, one per request in flight, shared by threads."""

    def __init__(self, config: RqliteConfig) -> None:
        self._authorization = _authorization(config)
        self._tls: ssl.SSLContext | None = None
        self._verify = config.verify
        self._pool: _Pool[_SocketLink] = _Pool(_socket_is_fresh, _close_socket)

    def call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        origin = origin_of(call.node)
        deadline = time.monotonic() + call.timeout
        link = self._pool.take(call.node)
        if link is None:
            try:
                link = self._connect(origin, call.timeout)
            except (OSError, ssl.SSLError) as exc:
                return _failure(exc, sent=False)
        try:
            link.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            link.sock.sendall(link.framing.request(call, origin, self._authorization))
            while True:
                link.sock.settimeout(max(deadline - time.monotonic(), 0.001))
                reply = link.framing.feed(link.sock.recv(_READ_SIZE))
                if reply is not None:
                    break
        except (OSError, ssl.SSLError, h11.ProtocolError) as exc:
            _close_socket(link)
            return _failure(exc, sent=True)
        except BaseException:
            _close_socket(link)
            raise
        if link.framing.next_cycle():
            self._pool.put(call.node, link)
        else:
            _close_socket(link)
        return reply

    def _connect(self, origin: Origin, timeout: float) -> _SocketLink:
        sock = socket.create_connection((origin.host, origin.port), timeout=timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if origin.tls:
                sock = self._context().wrap_socket(sock, server_hostname=origin.host)
        except BaseException:
            sock.close()
            raise
        return _SocketLink(sock, Framing())

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = tls_context(self._verify)
        return self._tls

    def close(self) -> None:
        for link in self._pool.drain():
            _close_socket(link)


# ---------------------------------------------------------------------------------- async


@dataclass
class _StreamLink:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    framing: Framing


def _stream_is_fresh(link: _StreamLink) -> bool:
    # The loop reads an idle connection in the background: EOF or unasked bytes show here.
    unasked = getattr(link.reader, "_buffer", b"")
    return not (link.writer.is_closing() or link.reader.at_eof() or unasked)


def _close_stream(link: _StreamLink) -> None:
    link.writer.close()


class AsyncWire:
    """The async driver: asyncio streams, one per request in flight."""

    def __init__(self, config: RqliteConfig) -> None:
        self._authorization = _authorization(config)
        self._tls: ssl.SSLContext | None = None
        self._verify = config.verify
        self._pool: _Pool[_StreamLink] = _Pool(_stream_is_fresh, _close_stream)

    async def call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        connected: list[bool] = []
        try:
            return await asyncio.wait_for(self._attempt(call, connected), call.timeout)
        except asyncio.TimeoutError as exc:
            return _failure(exc, sent=bool(connected))
        except (OSError, ssl.SSLError, h11.ProtocolError) as exc:
            return _failure(exc, sent=bool(connected))

    async def _attempt(self, call: HttpCall, connected: list[bool]) -> HttpReply:
        origin = origin_of(call.node)
        link = self._pool.take(call.node)
        if link is None:
            link = await self._connect(origin)
        connected.append(True)
        try:
            link.writer.write(link.framing.request(call, origin, self._authorization))
            while (reply := link.framing.feed(await link.reader.read(_READ_SIZE))) is None:
                pass
        except BaseException:  # a failure, a timeout or a cancel: the reply is not ours
            _close_stream(link)
            raise
        if link.framing.next_cycle():
            self._pool.put(call.node, link)
        else:
            _close_stream(link)
        return reply

    async def _connect(self, origin: Origin) -> _StreamLink:
        if origin.tls:
            if self._tls is None:
                self._tls = tls_context(self._verify)
            reader, writer = await asyncio.open_connection(
                origin.host, origin.port, ssl=self._tls, server_hostname=origin.host
            )
        else:
            reader, writer = await asyncio.open_connection(origin.host, origin.port)
        return _StreamLink(reader, writer, Framing())

    async def close(self) -> None:
        for link in self._pool.drain():
            _close_stream(link)
