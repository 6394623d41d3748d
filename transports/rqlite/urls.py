"""rqlite URLs: ``http(s)://[user:password@]host:port[,host:port...]``, parsed without
ever echoing the credentials.

A password may hold any character, ``#``, ``/``, ``?`` and ``@`` included, encoded or not:
the credentials are everything before the *last* ``@`` that precedes the host list
(``urllib.parse.urlsplit`` would end the authority at the first ``#``, ``/`` or ``?``
and take the rest of the password for a host). ``%XX`` escapes in the user and password
are decoded. Every error names the URL with its credentials replaced by ``***``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import unquote

from raftflow.errors import ConfigurationError

SCHEMES = {"http": "http", "https": "https", "rqlite": "http", "rqlites": "https"}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# A host name or IPv4 address, or an IPv6 address in brackets; then an optional port.
# A ";" that ends a cluster of a sharded deployment's URL (engine/shards/deployment.py).
_CLUSTER_END = re.compile(r";(?=\s*(?:[A-Za-z][A-Za-z0-9+.-]*://|;|$))")
_HOST = re.compile(r"^(?:\[[0-9A-Fa-f:.]+(?:%[\w.~-]+)?\]|[A-Za-z0-9._~%-]+)(?::(\d{1,5}))?$")


@dataclass(frozen=True)
class RqliteUrl:
    """One parsed URL: base URLs of its nodes (no credentials) and the credentials."""

    nodes: tuple[str, ...]
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def split_clusters(url: str) -> list[str]:
    """The clusters a sharded deployment's URL lists, ``;``-separated (``"http://a:4001;
    http://b:4001"``; one part for a URL of one cluster). A ``;`` separates clusters only
    where the next cluster's scheme (or another ``;``, or the end) follows it: one inside
    a password or a SQLite file's name does not (an empty part is the caller's error)."""
    return [part.strip() for part in _CLUSTER_END.split(url)]


def masked(url: str) -> str:
    """``url`` with anything that may be credentials replaced by ``***`` (for messages;
    each cluster of a ``;``-separated URL masked on its own)."""
    parts = split_clusters(url)
    if len(parts) > 1:
        return ";".join(masked(part) for part in parts)
    match = _SCHEME.match(url)
    rest = url[match.end() :] if match else url
    if "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    return (match.group(0) if match else "") + rest


def parse(url: str) -> RqliteUrl:
    """Split ``url`` into nodes and credentials; :class:`ConfigurationError` (credentials
    masked) when it is not an rqlite URL."""
    text = url.strip()
    match = _SCHEME.match(text)
    if match is None:
        raise ConfigurationError(
            f"not an rqlite URL: {masked(text)!r} (expected http(s)://[user:password@]host:port)"
        )
    scheme = SCHEMES.get(match.group(1).lower())
    if scheme is None:
        raise ConfigurationError(
            f"unsupported scheme {match.group(1)!r} in an rqlite URL (use http or https)"
        )
    rest = text[match.end() :]
    username = password = None
    if "@" in rest:
        userinfo, _, rest = rest.rpartition("@")
        user, _, secret = userinfo.partition(":")
        username, password = unquote(user), unquote(secret)
    # The host list ends where a path, query or fragment begins (rqlite URLs need none).
    hosts = re.split(r"[/?#]", rest, maxsplit=1)[0]
    nodes = []
    for host in hosts.split(","):
        if not host:
            raise ConfigurationError(f"empty host in the rqlite URL {masked(text)!r}")
        port = _HOST.match(host)
        if port is None or (port.group(1) is not None and not 0 < int(port.group(1)) < 65536):
            raise ConfigurationError(f"bad host {host!r} in the rqlite URL {masked(text)!r}")
        nodes.append(f"{scheme}://{host}")
    return RqliteUrl(tuple(nodes), username, password)


def split_urls(url: str) -> list[str]:
    """The URLs a string lists: ``http://a:4001,b:4001`` is one URL of two nodes, and
    ``http://a:4001,http://b:4001`` two URLs (a comma followed by a scheme starts the next;
    the credentials, before the last ``@``, are never split)."""
    head, at, tail = url.rpartition("@")
    parts = re.split(r",(?=[A-Za-z][A-Za-z0-9+.-]*://)", tail)
    return [head + at + parts[0], *parts[1:]]


def has_credentials(url: str) -> bool:
    """Whether an rqlite URL carries a user (and password) of its own."""
    match = _SCHEME.match(url.strip())
    return match is not None and "@" in url.strip()[match.end() :]
