"""A 1-step workflow's two writes alone: its start's and its outcome's commit's requests,
sent again through a floor client (bench/floor.py: one socket, the bytes prepared before
the clock starts), one after the other as a client running 1-step workflows in turn
sends them.

:mod:`bench.probe_start_result` captures the bytes raftflow sent for one execution and
calls :func:`replay`: what rqlite takes for those statements, with no Python of raftflow's
around them. Each round makes a new execution (every 32-hex id, commit id and lease token
in the statements drawn again; the commit's event seq is the one its start returned) and
checks that each statement changed its row.
"""

from __future__ import annotations

import json
import re
import statistics
import time
import uuid
from typing import Any

from bench.floor import FloorClient

_HEX = re.compile(r"[0-9a-f]{32}")


class _Replayer(FloorClient):
    """A floor client that sends a given request (head and body) and keeps the reply."""

    def exchange(self, request: bytes) -> tuple[int, bytes]:
        """Send ``request``; the nanoseconds until its reply was read, and the reply's body."""
        started = time.perf_counter_ns()
        self._sock.sendall(request)
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            self._buffer += self._receive()
        head, self._buffer = self._buffer[:end], self._buffer[end + 4 :]
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(self._buffer) < length:
            self._buffer += self._receive()
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        elapsed = time.perf_counter_ns() - started
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"a replayed write failed: {head[:40]!r} {body[:200]!r}")
        return elapsed, body


def _with_body(request: bytes, body: bytes) -> bytes:
    head = request.split(b"\r\n\r\n", 1)[0]
    lines = [
        line for line in head.split(b"\r\n") if not line.lower().startswith(b"content-length:")
    ]
    return b"\r\n".join([*lines, b"Content-Length: %d" % len(body)]) + b"\r\n\r\n" + body


def _fresh(value: Any, ids: dict[str, str], seq: tuple[int, int] | None) -> Any:
    if isinstance(value, str):
        return _HEX.sub(lambda m: ids.setdefault(m.group(0), uuid.uuid4().hex), value)
    if seq is not None and type(value) is int and value == seq[0]:
        return seq[1]
    return value


def _rewrite(request: bytes, ids: dict[str, str], seq: tuple[int, int] | None = None) -> bytes:
    """``request`` with its statements' parameters drawn again (the SQL text kept)."""
    statements = json.loads(request.split(b"\r\n\r\n", 1)[1])
    body = [[sql, *(_fresh(v, ids, seq) for v in params)] for sql, *params in statements]
    return _with_body(request, json.dumps(body).encode())


def _changed_each(reply: bytes) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = json.loads(reply)["results"]
    if any("error" in r or r.get("rows_affected") != 1 for r in results):
        raise RuntimeError(f"a replayed statement did not change its row: {results}")
    return results


def replay(url: str, start: bytes, start_seq: int, commit: bytes, rounds: int) -> dict[str, float]:
    """``rounds`` times the start, then its commit (p50 microseconds of each).
    ``start_seq``: the event seq the captured start's reply gave (it is in the commit)."""
    client = _Replayer(url)
    starts: list[int] = []
    commits: list[int] = []
    try:
        for _ in range(rounds):
            ids: dict[str, str] = {}
            elapsed, reply = client.exchange(_rewrite(start, ids))
            starts.append(elapsed)
            seq = int(_changed_each(reply)[-1]["last_insert_id"])
            elapsed, reply = client.exchange(_rewrite(commit, ids, (start_seq, seq)))
            commits.append(elapsed)
            _changed_each(reply)
    finally:
        client.close()
    return {
        "start": statistics.median(starts) / 1000,
        "commit": statistics.median(commits) / 1000,
    }
