"""raftflow's own HTTP/1.1 client for rqlite's nodes: keep-alive sockets and framing.

Every request raftflow makes is one small JSON POST (or a GET of ``/status``) to a node it
already knows, and at concurrency 1 a step waits for one such request. A general-purpose
client pays for what that never uses -- cookies, auth and redirect flows, URL merging,
``anyio`` under asyncio -- on every request (``python -m bench.probe_http`` measures it
against ``httpx``). A 5-step workflow run alone is 6 such requests in a row.

This is where raftflow deviates from the spec, which names ``httpx.AsyncClient`` for the
async twin: the semantics of a request are the same (one POST, the same failure
classification: ``sent`` is false only when no connection was made), and ``http="httpx"``
still selects it. The framing (:mod:`raftflow.transports.rqlite.framing`, sans I/O, shared
by the sync and async drivers) is raftflow's own rather than h11's, which costs more CPU
per request (``bench/probe_http.py`` measures both). The pool:

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
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from raftflow.transports.rqlite.framing import Framing, MalformedReplyError, Origin, origin_of
from raftflow.transports.rqlite.protocol import HttpCall, HttpReply, NetworkFailure, RqliteConfig

L = TypeVar("L")

#: Idle connections kept per node (more are closed when they come back).
MAX_IDLE = 20
_READ_SIZE = 65536


def tls_context(verify: bool | str) -> ssl.SSLContext:
    """The context of ``https`` nodes: the system CAs, a CA bundle, or no check at all."""
    if verify is False:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)


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


class _ReplyReader(asyncio.Protocol):
    """One connection on the loop: what it receives goes to its framing as it comes, and a
    complete reply (or the failure) to the request waiting for it -- no stream between."""

    def __init__(self) -> None:
        self.framing = Framing()
        self.transport: asyncio.Transport | None = None
        self._waiter: asyncio.Future[HttpReply] | None = None
        #: Closed, at its end, or sent bytes nobody asked for: never to be reused.
        self.stale = False
        self._end: tuple[Exception | None] | None = None  # how the connection ended

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    async def exchange(self, request: bytes, deadline: float) -> HttpReply:
        """Send ``request`` and wait for its reply until ``deadline`` (the loop's time)."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[HttpReply] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_at(deadline, _expire, waiter)
        try:
            self.transport.write(request)
            self._tell_end()  # it ended before the request: no reply will come
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def data_received(self, data: bytes) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.stale = True  # unasked: it would be read as the next request's reply
            return
        try:
            reply = self.framing.feed(data)
        except MalformedReplyError as exc:
            waiter.set_exception(exc)
            return
        if reply is not None:
            waiter.set_result(reply)

    def eof_received(self) -> bool:
        self._ended(None)
        return False  # closes the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended(exc)

    def _ended(self, exc: Exception | None) -> None:
        self.stale = True
        if self._end is None or exc is not None:  # an error outranks a clean end
            self._end = (exc,)
        self._tell_end()

    def _tell_end(self) -> None:
        """The request waiting learns that the connection ended: its reply, if the
        connection's end completes it, else the failure."""
        waiter = self._waiter
        if self._end is None or waiter is None or waiter.done():
            return
        (exc,) = self._end
        if exc is not None:
            waiter.set_exception(exc)
            return
        try:  # a reply that ends with the connection, or one cut short
            reply = self.framing.feed(b"")
        except MalformedReplyError as error:
            waiter.set_exception(error)
        else:
            assert reply is not None
            waiter.set_result(reply)


def _expire(waiter: asyncio.Future[HttpReply]) -> None:
    if not waiter.done():
        waiter.set_exception(asyncio.TimeoutError())


def _reader_is_fresh(link: _ReplyReader) -> bool:
    # The loop reads an idle connection in the background: EOF or unasked bytes show here.
    return not link.stale and link.transport is not None and not link.transport.is_closing()


def _close_reader(link: _ReplyReader) -> None:
    if link.transport is not None:
        link.transport.close()


class AsyncWire(_Driver[_ReplyReader]):
    """The async driver: asyncio transports, one per request in flight."""

    def __init__(self, config: RqliteConfig) -> None:
        super().__init__(config, _reader_is_fresh, _close_reader)

    async def call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        deadline = asyncio.get_running_loop().time() + call.timeout
        origin = origin_of(call.node)
        link = self._pool.take(call.node)
        if link is None:
            try:
                link = await _within(self._connect(origin), call.timeout)
            except (asyncio.TimeoutError, OSError, ssl.SSLError) as exc:
                return _failure(exc, sent=False)
        try:
            request = link.framing.request(call, origin, self._authorization)
            reply = await link.exchange(request, deadline)
        except (asyncio.TimeoutError, OSError, ssl.SSLError, MalformedReplyError) as exc:
            _close_reader(link)
            return _failure(exc, sent=True)
        except BaseException:  # a cancel: the reply is not ours
            _close_reader(link)
            raise
        self._release(call.node, link, link.framing)
        return reply

    async def _connect(self, origin: Origin) -> _ReplyReader:
        loop = asyncio.get_running_loop()
        if origin.tls:
            _, link = await loop.create_connection(
                _ReplyReader,
                origin.host,
                origin.port,
                ssl=self._context(),
                server_hostname=origin.host,
            )
        else:
            _, link = await loop.create_connection(_ReplyReader, origin.host, origin.port)
        return link

    async def close(self) -> None:
        self._drain()


async def _within(connecting: Coroutine[Any, Any, _ReplyReader], timeout: float) -> _ReplyReader:
    """A new connection, or :class:`asyncio.TimeoutError` after ``timeout`` seconds."""
    if sys.version_info >= (3, 11):  # a deadline on this task: no task of its own
        async with asyncio.timeout(timeout):
            return await connecting
    return await asyncio.wait_for(connecting, timeout)
