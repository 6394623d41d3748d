"""The Host allow-list: the dashboard answers only to the names it is served under.

A browser sends the name it resolved in ``Host``. A page on ``evil.example`` whose name
its owner then points at 127.0.0.1 (DNS rebinding) reaches a loopback dashboard as the
same origin -- cookies, CSRF token and all -- but its requests still say ``Host:
evil.example``. So every request (GET too) whose ``Host`` is not allowed is refused with
421 before anything else runs. Allowed by default: the bind address and ``localhost``,
``127.0.0.1`` and ``[::1]``, each with the bound port; ``--allowed-host NAME[:PORT]``
adds a name (any port when it names none), e.g. a reverse proxy's or an SSH tunnel's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from starlette.responses import PlainTextResponse

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("", "0.0.0.0", "::")


def parse_host(text: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6][:port]`` as (normalized name, port), None when it is not."""
    text = text.strip()
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:  # a bare IPv6 address (allowed in options, not in Host)
        name, port_text = text, None
    else:
        name, colon, port_text_or_empty = text.partition(":")
        port_text = port_text_or_empty if colon else None
    name = name.lower().rstrip(".")
    if not name or any(c in name for c in " /\\@?#"):
        return None
    try:
        name = ipaddress.ip_address(name).compressed
    except ValueError:
        if ":" in name:
            return None
    if port_text is None:
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


@dataclass(frozen=True)
class AllowedHosts:
    """Names (with a port, or None for any port) and the port a Host without one means."""

    entries: frozenset[tuple[str, int | None]]
    default_port: int = 80

    @classmethod
    def for_bind(
        cls, host: str, port: int, extra: Iterable[str] = (), *, tls: bool = False
    ) -> AllowedHosts:
        """The defaults for a dashboard bound to ``host:port``, plus ``extra``
        (:class:`ValueError` for one that is not ``NAME[:PORT]``)."""
        entries: set[tuple[str, int | None]] = set()
        for name in (*LOOPBACK_NAMES, *(() if host in WILDCARDS else (host,))):
            parsed = parse_host(name)
            if parsed is not None:
                entries.add((parsed[0], port))
        for text in extra:
            parsed = parse_host(text)
            if parsed is None:
                raise ValueError(f"--allowed-host {text!r}: expected NAME or NAME:PORT")
            entries.add(parsed)
        return cls(frozenset(entries), 443 if tls else 80)

    def allows(self, header: str | None) -> bool:
        parsed = parse_host(header) if header else None
        if parsed is None:
            return False
        name, port = parsed
        return (name, port or self.default_port) in self.entries or (name, None) in self.entries


class HostGuard:
    """ASGI middleware: 421 for a request whose ``Host`` is not allowed (no detail)."""

    def __init__(self, app: Any, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            hosts = [value for key, value in scope["headers"] if key == b"host"]
            if len(hosts) != 1 or not self.allowed.allows(hosts[0].decode("latin-1")):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                response = PlainTextResponse(
                    "misdirected request: this dashboard does not answer to that host name",
                    status_code=421,
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
