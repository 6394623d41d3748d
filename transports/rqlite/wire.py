"""raftflow's own HTTP/1.1 client for rqlite's nodes: keep-alive sockets and framing.

Every request raftflow makes is one small JSON POST (or a GET of ``/status``) to a node it
already knows, and at concurrency 1 a step waits for one such request. A general-purpose
client pays for what that never uses -- cookies, auth and redirect flows, URL merging,
``anyio`` under asyncio -- on every request: measured on this 2-core VM (``python -m
bench.probe_http``), ``httpx``'s async client spent 1.7-2.2 ms of CPU per single-row
INSERT and 1.5-2.1 ms more wall time than this module. A 5-step workflow run alone is 6
such requests in a row (docs/performance.md, "The HTTP client").

This is where raftflow deviates from the spec, which names ``httpx.AsyncClient`` for the
async twin: the semantics of a request are the same (one POST, the same failure
classification: ``sent`` is false only when no connection was made), and ``http="httpx"``
still selects it. The framing (:class:`Framing`, sans I/O, shared by the sync and async
drivers) is written here rather than taken from h11, which cost 0.2-0.3 ms more CPU per
request (measured): it writes requests whose every header raftflow builds, and reads
what RFC 9112 allows a reply to be -- a ``Content-Length`` body, a chunked one (with
extensions and trailers), one that ends with the connection, none (1xx, 204, 304),
``Connection: close``, HTTP/1.0. Anything else is a :class:`MalformedReplyError`: a failed
attempt, retried like a network failure, never a wrong reply. The pool:

- A connection serves one request at a time; an idle one is reused (most recent first)
  unless the server has closed it or sent something unasked, which is checked before
  reuse so a node that restarted costs no failed request.
- A request that is cancelled, times out or fails closes its connection: a connection is
  back in the pool only after a complete reply with nothing after it, so a late reply can
  never be read as the answer to the next request.
- ``timeout`` bounds the whole attempt: connect, TLS, send and the full reply.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import select
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Generic, TypeVar
from urllib.parse import urlencode, urlsplit

from raftflow.transports.rqlite.protocol import HttpCall, HttpReply, NetworkFailure, RqliteConfig

from raftflow.errors import ConfigurationError

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
    #: The ``Host`` header's value.
    host_bytes: bytes


@lru_cache(maxsize=64)
def origin_of(node: str) -> Origin:
    parts = urlsplit(node)
    tls = parts.scheme == "https"
    host = parts.hostname or ""
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if not host or not netloc.isascii() or any(c.isspace() or not c.isprintable() for c in netloc):
        raise ConfigurationError(f"not a node URL: {node!r}")
    return Origin(tls, host, parts.port or (443 if tls else 80), netloc.encode("ascii"))


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The context of ``https`` nodes: the system CAs, a CA bundle, or no check at all."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)


class MalformedReplyError(Exception):
    """A reply that is not well-formed HTTP/1.1 (or a connection closed in the middle)."""


#: A reply's head larger than this is refused (rqlite's are a few hundred bytes).
MAX_HEAD = 64 * 1024
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE, _DONE = range(8)


class Framing:
    """One connection's HTTP/1.1 framing, sans I/O: the bytes of a request, then the reply
    assembled from what the socket reads (RFC 9112: a ``Content-Length`` body, a chunked
    one, or one that ends when the server closes the connection)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._start()

    def _start(self) -> None:
        self._state = _HEAD
        self._status = 0
        self._served_by: str | None = None
        self._body: list[bytes] = []
        self._remaining = 0
        self._keep_alive = True

    def request(self, call: HttpCall, origin: Origin, authorization: bytes | None) -> bytes:
        target = call.path + ("?" + urlencode(call.params) if call.params else "")
        method = b"GET" if call.body is None else b"POST"
        head = [
            method + b" " + target.encode("ascii") + b" HTTP/1.1",
            b"Host: " + origin.host_bytes,
        ]
        if authorization is not None:
            head.append(b"Authorization: " + authorization)
        if call.body is not None:
            head.append(b"Content-Type: application/json")
            head.append(b"Content-Length: " + str(len(call.body)).encode())
        return b"\r\n".join(head) + b"\r\n\r\n" + (call.body or b"")

    def feed(self, data: bytes) -> HttpReply | None:
        """The reply once ``data`` completes it (``b""``: the server closed the
        connection); None while more is needed. :class:`MalformedReplyError` if it is broken."""
        if not data:
            if self._state != _UNTIL_CLOSE:
                raise MalformedReplyError("the connection closed before the reply was complete")
            self._keep_alive = False
            return self._complete()
        self._buffer += data
        buffer = self._buffer
        while True:
            state = self._state
            if state == _HEAD:
                head = _take_until(buffer, b"\r\n\r\n", "the reply's head")
                if head is None:
                    return None
                self._parse_head(head)
                if self._state == _DONE:  # no body
                    return self._complete()
            elif state in (_LENGTH, _CHUNK_DATA, _UNTIL_CLOSE):
                if not buffer:
                    return None
                take = len(buffer) if state == _UNTIL_CLOSE else min(self._remaining, len(buffer))
                self._body.append(bytes(buffer[:take]))
                del buffer[:take]
                self._remaining -= take
                if state == _UNTIL_CLOSE or self._remaining > 0:
                    continue
                if state == _LENGTH:
                    return self._complete()
                self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if len(buffer) < 2:
                    return None
                if buffer[:2] != b"\r\n":
                    raise MalformedReplyError("a chunk does not end with CRLF")
                del buffer[:2]
                self._state = _CHUNK_SIZE
            else:  # _CHUNK_SIZE, _TRAILERS: a line at a time
                line = _take_until(buffer, b"\r\n", "a chunk header")
                if line is None:
                    return None
                if state == _TRAILERS:
                    if not line:
                        return self._complete()
                    continue
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise MalformedReplyError(f"a bad chunk size: {line[:40]!r}") from None
                if size < 0:
                    raise MalformedReplyError("a negative chunk size")
                self._state, self._remaining = (_CHUNK_DATA, size) if size else (_TRAILERS, 0)

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise MalformedReplyError(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
        status = int(code)
        headers: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise MalformedReplyError(f"a malformed header line: {line[:60]!r}")
            headers[name.lower()] = value.strip()
        if 100 <= status < 200:  # informational (never asked for): the reply follows
            return
        self._status = status
        served_by = headers.get(b"x-rqlite-served-by")
        self._served_by = None if served_by is None else served_by.decode("latin-1")
        connection = headers.get(b"connection", b"").lower()
        if version == b"HTTP/1.0":
            self._keep_alive = b"keep-alive" in connection
        else:
            self._keep_alive = b"close" not in connection
        encoding = headers.get(b"transfer-encoding", b"").lower()
        length = headers.get(b"content-length")
        if status in (204, 304):
            self._state = _LENGTH
            self._remaining = 0
        elif encoding and encoding != b"identity":
            # Only plain chunked: raftflow asks for no coding (no Accept-Encoding, no TE).
            if encoding != b"chunked":
                raise MalformedReplyError(f"an unsupported transfer-encoding: {encoding[:40]!r}")
            self._state = _CHUNK_SIZE
        elif length is not None:
            if not length.isdigit():
                raise MalformedReplyError(f"a bad content-length: {length[:40]!r}")
            self._state, self._remaining = _LENGTH, int(length)
        else:
            self._state, self._keep_alive = _UNTIL_CLOSE, False
        if self._state == _LENGTH and self._remaining == 0:
            self._state = _DONE

    def _complete(self) -> HttpReply:
        self._state = _DONE
        return HttpReply(self._status, b"".join(self._body), self._served_by)

    def next_cycle(self) -> bool:
        """Ready the connection for another request; False if it must be closed (the
        server said so, or sent more than the reply)."""
        if self._state != _DONE or not self._keep_alive or self._buffer:
            return False
        self._start()
        return True


def _take_until(buffer: bytearray, separator: bytes, what: str) -> bytes | None:
    """The bytes before ``separator``, taken from ``buffer`` with it; None until it comes."""
    end = buffer.find(separator)
    if end < 0:
        if len(buffer) > MAX_HEAD:
            raise MalformedReplyError(f"{what} is too large")
        return None
    taken = bytes(buffer[:end])
    del buffer[: end + len(separator)]
    return taken


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


class _Driver(Generic[L]):
    """What both drivers hold: the credentials' header, the TLS context (made on first
    use), the pool; and what they do with a connection once its reply is read."""

    def __init__(
        self, config: RqliteConfig, is_fresh: Callable[[L], bool], close: Callable[[L], None]
    ) -> None:
        self._authorization = _authorization(config)
        self._verify = config.verify
        self._tls: ssl.SSLContext | None = None
        self._pool: _Pool[L] = _Pool(is_fresh, close)
        self._close = close

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = tls_context(self._verify)
        return self._tls

    def _release(self, node: str, link: L, framing: Framing) -> None:
        """Back to the pool if the reply left it ready for another request, else closed."""
        if framing.next_cycle():
            self._pool.put(node, link)
        else:
            self._close(link)

    def _drain(self) -> None:
        for link in self._pool.drain():
            self._close(link)


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


class SyncWire(_Driver[_SocketLink]):
    """The sync driver: blocking sockets, one per request in flight, shared by threads."""

    def __init__(self, config: RqliteConfig) -> None:
        super().__init__(config, _socket_is_fresh, _close_socket)

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
        except (OSError, ssl.SSLError, MalformedReplyError) as exc:
            _close_socket(link)
            return _failure(exc, sent=True)
        except BaseException:
            _close_socket(link)
            raise
        self._release(call.node, link, link.framing)
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

    def close(self) -> None:
        self._drain()


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


class AsyncWire(_Driver[_StreamLink]):
    """The async driver: asyncio streams, one per request in flight."""

    def __init__(self, config: RqliteConfig) -> None:
        super().__init__(config, _stream_is_fresh, _close_stream)

    async def call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        connected: list[bool] = []
        try:
            if sys.version_info >= (3, 11):  # a deadline on this task: no task of its own
                async with asyncio.timeout(call.timeout):
                    return await self._attempt(call, connected)
            return await asyncio.wait_for(self._attempt(call, connected), call.timeout)
        except (asyncio.TimeoutError, OSError, ssl.SSLError, MalformedReplyError) as exc:
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
        self._release(call.node, link, link.framing)
        return reply

    async def _connect(self, origin: Origin) -> _StreamLink:
        if origin.tls:
            reader, writer = await asyncio.open_connection(
                origin.host, origin.port, ssl=self._context(), server_hostname=origin.host
            )
        else:
            reader, writer = await asyncio.open_connection(origin.host, origin.port)
        return _StreamLink(reader, writer, Framing())

    async def close(self) -> None:
        self._drain()
