"""An HTTP proxy in front of one rqlite node that loses chosen answers -- after rqlite
has applied the request.

This is the ambiguous failure of a real network: the write reached the leader and was
committed, but the client never hears back (connection closed without a response), so
it cannot tell whether to retry. Every request is forwarded to the real node; only the
bytes of the answer are withheld.

    with LossyProxy(node.http_port) as proxy:
        proxy.lose_next("claim")      # the next request carrying queue.sql's "claim"
        transport = RqliteTransport.from_url([proxy.url, *other_nodes])

One request per client connection (``Connection: close`` is forced both ways), so
request boundaries need no HTTP parsing beyond the head and ``Content-Length``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from types import TracebackType

from raftflow.transports.queue import QUERIES
from raftflow.transports.rqlite.numbered import numbering

HOST = "127.0.0.1"


def _read_request(conn: socket.socket) -> tuple[bytes, bytes] | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head, body


def _statement_names(body: bytes) -> set[str]:
    """Names (in queue.sql) of the statements a request carries."""
    try:
        statements = json.loads(body)
        texts = {s[0] for s in statements if isinstance(s, list) and s}
    except (ValueError, TypeError):
        return set()
    return {name for name, sql in QUERIES.queries.items() if _sent_forms(sql) & texts}


def _sent_forms(sql: str) -> set[str]:
    """A statement's text as written, and as sent with its parameters numbered."""
    numbered = numbering(sql)
    return {sql} if numbered is None else {sql, numbered[0]}


class LossyProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.create_server((HOST, 0))
        self._listener.settimeout(0.1)
        self._closed = False
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._to_lose: list[str] = []
        self.lost: list[str] = []  # statement names whose answer was withheld
        self.forwarded = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def lose_next(self, statement: str, times: int = 1) -> None:
        """Withhold the answers to the next ``times`` requests that carry ``statement``."""
        assert statement in QUERIES.queries, statement
        with self._lock:
            self._to_lose.extend([statement] * times)

    def heal(self) -> None:
        """Forget every answer still to be lost."""
        with self._lock:
            self._to_lose.clear()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(30)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            request = _read_request(conn)
            if request is None:
                return
            head, body = request
            lines = [
                line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")
            ]
            forwarded = b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body
            names = _statement_names(body)
            with self._lock:
                lose = next((n for n in self._to_lose if n in names), None)
                if lose is not None:
                    self._to_lose.remove(lose)
                    self.lost.append(lose)
                self.forwarded += 1
            answer = b""
            with socket.create_connection((HOST, self.target_port), timeout=30) as upstream:
                upstream.sendall(forwarded)
                while chunk := upstream.recv(65536):  # read to the end: it was applied
                    answer += chunk
            if lose is None:
                with contextlib.suppress(OSError):
                    conn.sendall(answer)

    def close(self) -> None:
        self._closed = True
        self._thread.join(5)
        self._listener.close()

    def __enter__(self) -> LossyProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
