"""HTTP/1.1 framing without I/O: the bytes of a request, and a reply read from a stream.

:class:`Framing` writes the requests raftflow sends (every header built here) and reads
what RFC 9112 allows a reply to be -- a ``Content-Length`` body, a chunked one (with
extensions and trailers), one that ends with the connection, none (1xx, 204, 304),
``Connection: close``, HTTP/1.0. Anything else is a :class:`MalformedReplyError`: a failed
attempt, retried like a network failure, never a wrong reply. The sync and async drivers of
:mod:`raftflow.transports.rqlite.wire` share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlencode, urlsplit

from raftflow.transports.rqlite.protocol import HttpCall, HttpReply

from raftflow.errors import ConfigurationError


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
        params = tuple(call.params.items())
        head = _request_head(call.body is None, call.path, params, origin.host_bytes)
        if authorization is not None:
            head += b"Authorization: " + authorization + b"\r\n"
        if call.body is None:
            return head + b"\r\n"
        return b"".join((head, _JSON_LENGTH, b"%d\r\n\r\n" % len(call.body), call.body))

    def feed(self, data: bytes) -> HttpReply | None:
        """The reply once ``data`` completes it (``b""``: the server closed the
        connection); None while more is needed. :class:`MalformedReplyError` if it is broken."""
        if not data:
            if self._state != _UNTIL_CLOSE:
                raise MalformedReplyError("the connection closed before the reply was complete")
            self._keep_alive = False
            return self._complete()
        buffer = self._buffer
        if self._state == _HEAD and not buffer and (end := data.find(b"\r\n\r\n")) >= 0:
            # A head that came whole in one read: parsed without the buffer's copies.
            self._parse_head(data[:end])
            end += 4
            if self._state == _LENGTH and self._remaining == len(data) - end:
                # The common case: all of a reply with a length, and nothing after it.
                self._state = _DONE
                return HttpReply(self._status, bytes(data[end:]), self._served_by)
            data = data[end:]
            if self._state == _DONE:  # no body
                buffer += data
                return self._complete()
        buffer += data
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


@lru_cache(maxsize=256)
def _request_head(get: bool, path: str, params: tuple[tuple[str, str], ...], host: bytes) -> bytes:
    """A request's first lines, the same for every request to one endpoint: made once."""
    target = path + ("?" + urlencode(params) if params else "")
    method = b"GET" if get else b"POST"
    return method + b" " + target.encode("ascii") + b" HTTP/1.1\r\nHost: " + host + b"\r\n"


_JSON_LENGTH = b"Content-Type: application/json\r\nContent-Length: "


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
