"""Connections to an rqlite cluster: the sync one (httpx or requests) and the async one.

They only perform what :func:`raftflow.transports.rqlite.protocol.exchange` asks for; both map
their HTTP library's failures onto :class:`~raftflow.transports.rqlite.protocol.NetworkFailure`
here, so the rest of raftflow sees one error model whatever the library.
Credentials travel in the ``Authorization`` header only: they are never part of a URL,
so they cannot leak into an exception message or a log line.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import httpx
from raftflow.transports.db.flow import Request, Response, Statement
from raftflow.transports.rqlite.protocol import (
    Exchange,
    HttpCall,
    HttpReply,
    NetworkFailure,
    NodeRing,
    RqliteConfig,
    Sleep,
    exchange,
)
from raftflow.transports.rqlite.wire import AsyncWire, SyncWire

from raftflow.errors import ConfigurationError

#: The HTTP client of a connection. ``"raftflow"`` (the default) is raftflow's own HTTP/1.1
#: on keep-alive sockets (:mod:`raftflow.transports.rqlite.wire`: less work per request
#: than httpx); ``"httpx"`` is the spec's client, ``"requests"`` (sync only) the
#: optional extra.
HttpLibrary = Literal["raftflow", "httpx", "requests"]
HTTP_LIBRARIES: tuple[HttpLibrary, ...] = ("raftflow", "httpx", "requests")

# A strong read goes through the Raft log, so it proves a leader *with a quorum* can
# serve -- a weak one is answered by a leader that lost its quorum and has not noticed.
# One Raft entry per connect.
READY_PROBE = Request((Statement("rqlite.ready", "SELECT 1"),), level="strong")


class _SyncHttp(Protocol):
    def call(self, call: HttpCall) -> HttpReply | NetworkFailure: ...

    def close(self) -> None: ...


class _HttpxSync:
    def __init__(self, config: RqliteConfig) -> None:
        self._client = httpx.Client(auth=config.auth, verify=_ssl_context(config.verify))

    def call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        try:
            return _reply(self._client.request(**_httpx_request(call)))
        except httpx.HTTPError as exc:
            return _httpx_failure(exc)

    def close(self) -> None:
        self._client.close()


class _RequestsSync:
    def __init__(self, config: RqliteConfig) -> None:
        try:
            import requests
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "http='requests' needs the optional dependency: pip install 'raftflow[requests]'"
            ) from exc
        self._requests = requests
        self._session = requests.Session()
        self._session.auth = config.auth
        # Passed with every request too: requests lets $REQUESTS_CA_BUNDLE override a
        # session's verify, which would silently replace the CA the caller chose.
        self._verify = config.verify

    def call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        exceptions = self._requests.exceptions
        try:
            response = self._session.request(
                "GET" if call.body is None else "POST",
                call.node + call.path,
                params=call.params,
                data=call.body,
                headers=_JSON_HEADERS,
                timeout=call.timeout,
                verify=self._verify,
            )
        except exceptions.SSLError as exc:
            return NetworkFailure(sent=False, detail=_describe(exc), untrusted=_untrusted(exc))
        except exceptions.ConnectTimeout as exc:
            return NetworkFailure(sent=False, detail=_describe(exc))
        except exceptions.ConnectionError as exc:
            # requests folds "refused" and "reset after sending" into ConnectionError.
            refused = "NewConnectionError" in repr(exc) or "Connection refused" in str(exc)
            return NetworkFailure(sent=not refused, detail=_describe(exc))
        except exceptions.RequestException as exc:
            return NetworkFailure(sent=True, detail=_describe(exc))
        return _reply(response)

    def close(self) -> None:
        self._session.close()


class _Connection:
    """What both connections hold: where the cluster is, and which node to try next."""

    def __init__(self, config: RqliteConfig) -> None:
        self.config = config
        self.ring = NodeRing(config.nodes)
        self.round_trips = 0

    @property
    def identity(self) -> str:
        return self.config.identity

    def _exchange(self, request: Request) -> Exchange:
        return exchange(self.config, self.ring, request, time.monotonic)

    def _ready_probe(self, timeout: float | None) -> Exchange:
        """The readiness probe, with ``connect_timeout`` (or ``timeout``) as its budget."""
        budget = self.config.connect_timeout if timeout is None else timeout
        config = self.config.with_options(retry_timeout=budget)
        return exchange(config, self.ring, READY_PROBE, time.monotonic)

    def _get_call(self, path: str) -> HttpCall:
        self.round_trips += 1
        return HttpCall(self.ring.node(), path, {}, None, self.config.timeout)


class RqliteConnection(_Connection):
    """A sync connection to an rqlite cluster (see :data:`HttpLibrary` for ``http``)."""

    def __init__(self, config: RqliteConfig, *, http: HttpLibrary = "raftflow") -> None:
        super().__init__(config)
        _check_library(http, HTTP_LIBRARIES)
        self._http: _SyncHttp
        if http == "requests":
            self._http = _RequestsSync(config)
        elif http == "httpx":
            self._http = _HttpxSync(config)
        else:
            self._http = SyncWire(config)
        self.http_library: HttpLibrary = http

    def send(self, request: Request) -> Response:
        return self._run(self._exchange(request))

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until some node answers a read through a leader (``connect_timeout``)."""
        self._run(self._ready_probe(timeout)).raise_for_errors()

    def get(self, path: str) -> HttpReply | NetworkFailure:
        """One GET on the current node (``/status``, ``/readyz``); no retries."""
        return self._http.call(self._get_call(path))

    def to_async(self) -> AsyncRqliteConnection:
        """An async connection to the same cluster with the same credentials and options."""
        return AsyncRqliteConnection(self.config, http=async_library(self.http_library))

    def _run(self, flow: Exchange) -> Response:
        reply: HttpReply | NetworkFailure | None = None
        while not isinstance(step := _advance(flow, reply), Response):
            reply = None
            if isinstance(step, Sleep):
                time.sleep(step.seconds)
            else:
                self.round_trips += 1
                reply = self._http.call(step)
        return step

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"<RqliteConnection nodes={list(self.config.nodes)} http={self.http_library}>"


class AsyncRqliteConnection(_Connection):
    """The async twin of :class:`RqliteConnection`: ``http`` is ``"raftflow"`` (the default) or
    ``"httpx"`` (``httpx.AsyncClient``, the spec's client)."""

    def __init__(self, config: RqliteConfig, *, http: HttpLibrary = "raftflow") -> None:
        super().__init__(config)
        _check_library(http, ("raftflow", "httpx"))
        self._http: _AsyncHttp = _HttpxAsync(config) if http == "httpx" else AsyncWire(config)
        self.http_library: HttpLibrary = http

    async def send(self, request: Request) -> Response:
        return await self._run(self._exchange(request))

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until some node answers a read through a leader (``connect_timeout``)."""
        (await self._run(self._ready_probe(timeout))).raise_for_errors()

    async def get(self, path: str) -> HttpReply | NetworkFailure:
        """One GET on the current node (``/status``, ``/readyz``); no retries."""
        return await self._call(self._get_call(path))

    async def _run(self, flow: Exchange) -> Response:
        reply: HttpReply | NetworkFailure | None = None
        while not isinstance(step := _advance(flow, reply), Response):
            reply = None
            if isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
            else:
                self.round_trips += 1
                reply = await self._call(step)
        return step

    async def _call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        return await self._http.call(call)

    async def close(self) -> None:
        await self._http.close()

    def __repr__(self) -> str:
        return f"<AsyncRqliteConnection nodes={list(self.config.nodes)} http={self.http_library}>"


class _AsyncHttp(Protocol):
    async def call(self, call: HttpCall) -> HttpReply | NetworkFailure: ...

    async def close(self) -> None: ...


class _HttpxAsync:
    def __init__(self, config: RqliteConfig) -> None:
        self._client = httpx.AsyncClient(auth=config.auth, verify=_ssl_context(config.verify))

    async def call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        try:
            return _reply(await self._client.request(**_httpx_request(call)))
        except httpx.HTTPError as exc:
            return _httpx_failure(exc)

    async def close(self) -> None:
        await self._client.aclose()


def async_library(http: HttpLibrary) -> HttpLibrary:
    """The async twin's client for a sync one's: ``requests`` has no async twin."""
    return "httpx" if http == "httpx" else "raftflow"


def _check_library(http: object, allowed: tuple[HttpLibrary, ...]) -> None:
    if http not in allowed:
        raise ConfigurationError(
            f"http must be one of {', '.join(map(repr, allowed))}, not {http!r}"
        )


def _advance(
    flow: Exchange, reply: HttpReply | NetworkFailure | None
) -> HttpCall | Sleep | Response:
    """The exchange's next step, or its response once it is done."""
    try:
        return flow.send(reply)
    except StopIteration as stop:
        response: Response = stop.value
        return response


_JSON_HEADERS = {"Content-Type": "application/json"}


def _httpx_request(call: HttpCall) -> dict[str, Any]:
    """``httpx.Client.request`` arguments for a call (its async twin takes the same)."""
    return {
        "method": "GET" if call.body is None else "POST",
        "url": call.node + call.path,
        "params": call.params,
        "content": call.body,
        "headers": _JSON_HEADERS,
        "timeout": call.timeout,
    }


def _reply(response: httpx.Response | Any) -> HttpReply:
    return HttpReply(response.status_code, response.content, _served_by(response.headers))


def _httpx_failure(exc: httpx.HTTPError) -> NetworkFailure:
    # Refused or never connected: the request cannot have reached rqlite.
    sent = not isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))
    return NetworkFailure(sent=sent, detail=_describe(exc), untrusted=_untrusted(exc))


def _ssl_context(verify: bool | str) -> bool | ssl.SSLContext:
    """httpx takes a CA bundle as an SSL context (a path is deprecated)."""
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    return verify


def _untrusted(exc: BaseException) -> bool:
    """Whether a failure is a refused TLS certificate (anywhere in its cause chain)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return "CERTIFICATE_VERIFY_FAILED" in str(exc)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _served_by(headers: Any) -> str | None:
    value: str | None = headers.get("X-Rqlite-Served-By")
    return value


def connect(
    url: str | Sequence[str], *, http: HttpLibrary = "raftflow", wait: bool = True, **options: Any
) -> RqliteConnection:
    """Parse ``url`` (``options`` are :class:`RqliteConfig` fields), open a connection and
    wait up to ``connect_timeout`` for a leader with a quorum (unless not ``wait``);
    closed again on failure."""
    connection = RqliteConnection(RqliteConfig.from_url(url, **options), http=http)
    try:
        if wait:
            connection.wait_ready()
    except BaseException:
        connection.close()
        raise
    return connection


async def aconnect(
    url: str | Sequence[str], *, http: HttpLibrary = "raftflow", **options: Any
) -> AsyncRqliteConnection:
    """The async twin of :func:`connect` (``http="requests"`` means ``"raftflow"`` here)."""
    _check_library(http, HTTP_LIBRARIES)
    config = RqliteConfig.from_url(url, **options)
    connection = AsyncRqliteConnection(config, http=async_library(http))
    try:
        await connection.wait_ready()
    except BaseException:
        await connection.close()
        raise
    return connection
