"""rqlite's HTTP API without I/O: configuration, encoding, decoding, errors and retries.

:func:`exchange` is a flow that turns one :class:`~raftflow.transports.db.flow.Request` into
HTTP calls and sleeps, and reads the replies: which endpoint, which query parameters, what a reply
means, when to move to another node and whether a failed attempt may have been applied.
The sync and async connections in :mod:`raftflow.transports.rqlite.client` only perform the calls.
This is the one place where rqlite's errors become raftflow's.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from raftflow.transports.db.flow import Request, Response, Result, is_read
from raftflow.transports.rqlite.numbered import positional
from raftflow.transports.rqlite.rewrites import parse_changes_nothing
from raftflow.transports.rqlite.urls import parse as parse_url
from raftflow.transports.rqlite.urls import split_urls

from raftflow.errors import (
    AuthenticationError,
    ConfigurationError,
    ProtocolError,
    UnavailableError,
)

#: The least time an attempt gets, so the one started as the budget runs out can succeed.
_LAST_ATTEMPT = 0.1


@dataclass(frozen=True)
class RqliteConfig:
    """Where and how to reach an rqlite cluster.

    ``nodes`` are base URLs without credentials; any node serves any request (followers
    forward to the leader) and the client moves to the next one when a node is down.
    """

    nodes: tuple[str, ...]
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    verify: bool | str = True
    timeout: float = 10.0
    retry_timeout: float = 15.0
    connect_timeout: float = 30.0

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ConfigurationError("an rqlite URL needs at least one node")
        if isinstance(self.verify, str) and not os.path.isfile(self.verify):
            raise ConfigurationError(f"verify: no CA bundle file at {self.verify!r}")
        if not isinstance(self.verify, (bool, str)):
            raise ConfigurationError("verify must be True, False or the path of a CA bundle")
        for name in ("timeout", "retry_timeout", "connect_timeout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ConfigurationError(f"{name} must be a positive number of seconds")

    @classmethod
    def from_url(cls, url: str | Sequence[str], **options: Any) -> RqliteConfig:
        """Parse ``http(s)://[user:pass@]host:port[,host:port...]`` (or a list of such URLs;
        :mod:`~raftflow.transports.rqlite.urls`: a password may hold any character).

        Credentials may sit in any of the URLs; keyword ``options`` override fields.
        """
        urls = split_urls(url) if isinstance(url, str) else list(url)
        if not urls or not all(isinstance(u, str) and u for u in urls):
            raise ConfigurationError("from_url() takes a URL string or a list of URL strings")
        nodes: list[str] = []
        username = password = None
        for raw in urls:
            parsed = parse_url(raw)
            nodes.extend(parsed.nodes)
            if parsed.username is not None:
                username, password = parsed.username, parsed.password
        options.setdefault("username", username)
        options.setdefault("password", password)
        return cls(nodes=tuple(dict.fromkeys(nodes)), **options)

    @property
    def auth(self) -> tuple[str, str] | None:
        if self.username is None:
            return None
        return (self.username, self.password or "")

    @property
    def identity(self) -> str:
        """Equal for two configs that reach the same cluster (the sorted node set)."""
        return "rqlite:" + ",".join(sorted(self.nodes))

    def with_options(self, **options: Any) -> RqliteConfig:
        return replace(self, **options)


# --- one HTTP exchange -------------------------------------------------------------------


@dataclass(frozen=True)
class HttpCall:
    """Ask the driver to POST (or GET when ``body`` is None) ``path`` on ``node``."""

    node: str
    path: str
    params: dict[str, str]
    body: bytes | None
    timeout: float


@dataclass(frozen=True)
class Sleep:
    """Ask the driver to wait before the next attempt."""

    seconds: float


@dataclass(frozen=True)
class HttpReply:
    status: int
    body: bytes
    served_by: str | None = None


@dataclass(frozen=True)
class NetworkFailure:
    """An attempt that got no HTTP reply. ``sent`` is false only when the connection was
    refused or never established, so the request cannot have reached rqlite."""

    sent: bool
    detail: str
    #: The server's TLS certificate was refused: retrying cannot help.
    untrusted: bool = False


Exchange = Generator[HttpCall | Sleep, HttpReply | NetworkFailure | None, Response]


class NodeRing:
    """Which node to try next; shared by all requests of a connection (sticky on success,
    drifting towards the leader)."""

    def __init__(self, nodes: Sequence[str]) -> None:
        self.nodes = tuple(nodes)
        self.current = 0

    def node(self) -> str:
        return self.nodes[self.current % len(self.nodes)]

    def advance(self) -> None:
        self.current = (self.current + 1) % len(self.nodes)

    def forwarded(self, node: str) -> None:
        """``node`` answered, but as a follower: it forwarded the request to the leader
        (its reply names the leader in ``X-Rqlite-Served-By``), one more hop each time. Try
        the next node next time, until one serves requests itself; once, however many
        concurrent replies of ``node`` say so. The header gives the leader's Raft address,
        not its HTTP one, so the ring walks instead of jumping."""
        if len(self.nodes) > 1 and self.node() == node:
            self.advance()


def encode(request: Request) -> tuple[str, dict[str, str], bytes]:
    """Endpoint, query parameters and JSON body for a request.

    Reads go to ``/db/query`` (needs only the ``query`` permission), writes to
    ``/db/execute``, mixed requests to ``/db/request``; both of the latter are one Raft entry.
    A write whose statements rqlite's parse cannot change skips it (``noparse``:
    :mod:`raftflow.transports.rqlite.rewrites`).
    """
    return _encode(request)[:3]


def _encode(request: Request) -> tuple[str, dict[str, str], bytes, bool]:
    """:func:`encode`, and whether the request only reads."""
    statements = [_statement(s.sql, s.params) for s in request.statements]
    body = _JSON.encode(statements).encode()
    reads = [is_read(s.sql) for s in request.statements]
    read_only = all(reads)
    params: dict[str, str] = {}
    if read_only:
        path = "/db/query"
        params["level"] = request.level
    else:
        path = "/db/request" if any(reads) else "/db/execute"
        if all(parse_changes_nothing(statement[0]) for statement in statements):
            params["noparse"] = ""
    if request.transaction and len(statements) > 1:
        params["transaction"] = ""
    return path, params, body, read_only


#: ``json.dumps(..., separators=(",", ":"), allow_nan=False)``, made once.
_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _statement(sql: str, params: Any) -> list[Any]:
    """One statement of the body: named parameters go numbered where that is exact
    (:mod:`raftflow.transports.rqlite.numbered`)."""
    if hasattr(params, "keys"):
        return positional(sql, params) or [sql, dict(params)]
    return [sql, *params]


_UNPARSED: Any = object()


def decode(request: Request, body: bytes, ambiguous: bool, payload: Any = _UNPARSED) -> Response:
    """Turn rqlite's JSON answer into a :class:`Response` (one result per statement);
    ``payload`` is the body already parsed, when the caller did."""
    try:
        if payload is _UNPARSED:
            payload = _loads(body)
        raw_results = payload["results"]
        if not isinstance(raw_results, list):
            raise TypeError("results is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise ProtocolError(f"unexpected answer from rqlite: {_excerpt(body)}") from exc
    results: list[Result] = []
    for raw in raw_results:
        if not isinstance(raw, dict):
            raise ProtocolError(f"unexpected result from rqlite: {_excerpt(body)}")
        values = raw.get("values")
        results.append(
            Result(
                columns=tuple(raw.get("columns") or ()),
                rows=tuple(map(tuple, values)) if values else (),
                rows_affected=int(raw.get("rows_affected") or 0),
                last_insert_id=raw.get("last_insert_id"),
                error=raw.get("error"),
            )
        )
    # In a transaction rqlite stops at the first error and returns fewer results; the
    # statements it did not reach count as failed (they were rolled back).
    if len(results) < len(request.statements):
        reason = next((r.error for r in results if r.error), "not executed")
        results.extend(
            Result(error=f"not executed: {reason}")
            for _ in range(len(request.statements) - len(results))
        )
    return Response(request, tuple(results), ambiguous=ambiguous)


def exchange(config: RqliteConfig, ring: NodeRing, request: Request, clock: Any) -> Exchange:
    """The flow of one request: attempts across nodes until an answer or the budget is spent.

    ``clock`` is a monotonic time function (the drivers pass ``time.monotonic``).
    """
    path, params, body, read_only = _encode(request)
    writes = not read_only
    deadline = clock() + config.retry_timeout
    delay = 0.05
    ambiguous = False
    tried_in_round = 0
    last_problem = "no attempt made"
    while True:
        node = ring.node()
        # An attempt never outlives the budget: a hung node (it accepts connections but
        # never answers) would otherwise hold the request for the whole ``timeout``.
        timeout = min(config.timeout, max(deadline - clock(), _LAST_ATTEMPT))
        reply = yield HttpCall(node, path, params, body, timeout)
        if isinstance(reply, HttpReply) and reply.status == 200:
            payload = _parse(reply.body)  # once: decode() uses it
            problem = _top_level_error(payload)
            if problem is None:
                if reply.served_by is not None:
                    ring.forwarded(node)
                return decode(request, reply.body, ambiguous, payload)
            # A top-level error is the cluster's, never the statements' (those are
            # per result): forwarding to a leader that died, leadership lost while
            # committing... Retry; a write may have been applied.
            ambiguous = ambiguous or writes
            last_problem = f"{node}: {problem}"
        elif isinstance(reply, HttpReply):
            if reply.status == 401:
                raise AuthenticationError(
                    "rqlite answered 401: wrong username or password, or the user lacks "
                    f"the permission for {path}"
                )
            if reply.status in (400, 404, 405, 413):
                raise ProtocolError(
                    f"rqlite rejected the request with HTTP {reply.status}: {_excerpt(reply.body)}"
                )
            # 503 means no leader: nothing was applied. Other 5xx may follow an apply.
            if reply.status != 503:
                ambiguous = ambiguous or writes
            last_problem = f"{node}: HTTP {reply.status} {_excerpt(reply.body)}"
        elif isinstance(reply, NetworkFailure):
            if reply.untrusted:
                raise ConfigurationError(
                    f"{node}: rqlite's TLS certificate is not trusted ({reply.detail}); "
                    "pass verify='/path/to/ca.pem' (or verify=False, insecure)"
                )
            ambiguous = ambiguous or (writes and reply.sent)
            last_problem = f"{node}: {reply.detail}"
        ring.advance()
        tried_in_round += 1
        if clock() >= deadline:
            raise UnavailableError(
                f"rqlite did not answer within {config.retry_timeout:g}s (last: {last_problem})",
                ambiguous=ambiguous,
            )
        if tried_in_round >= len(ring.nodes):
            tried_in_round = 0
            yield Sleep(min(delay, max(0.0, deadline - clock())))
            delay = min(delay * 2, 1.0)


def _parse(body: bytes) -> Any:
    """The JSON of an answer; ``_UNPARSED`` when it is not JSON (decode() reports it)."""
    try:
        return _loads(body)
    except ValueError:
        return _UNPARSED


def _loads(body: bytes) -> Any:
    """``json.loads(body)``: an object that starts as UTF-8 does (rqlite's answers) is
    decoded as json.loads would find it is, without its look at every other encoding."""
    if body[:1] == b"{" and body[1:2] != b"\x00":
        return _JSON_OBJECT.decode(body.decode("utf-8", "surrogatepass"))
    return json.loads(body)


_JSON_OBJECT = json.JSONDecoder()


def _top_level_error(payload: Any) -> str | None:
    if isinstance(payload, dict) and payload.get("error"):
        return str(payload["error"])
    return None


def _excerpt(body: bytes, limit: int = 200) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."
