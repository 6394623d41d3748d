"""The floor: one write from a minimal client, what no client library can beat.

One kept-alive socket to the leader (``TCP_NODELAY``), the request's bytes prepared once
(a single-row INSERT to ``/db/execute``), the reply read by its ``Content-Length``: no
pool, no header objects, no JSON encoding per request. The latency phase measures it in
slices beside its rounds (bench/turnaround.py) and sets the one-client goals against it;
the raw phase's ``httpx`` writes stay beside it, for comparison.

    python -m bench.floor --url http://127.0.0.1:4001 --seconds 2
"""

from __future__ import annotations

import argparse
import json
import socket
import time
import urllib.parse
from typing import Any

from bench import latency

SCHEMA = "CREATE TABLE IF NOT EXISTS bench_floor (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)"
INSERT = [["INSERT INTO bench_floor (v) VALUES (?)", 1]]


class FloorClient:
    """Single-row INSERTs, one at a time, on one socket (see the module docstring)."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 4001
        body = json.dumps(INSERT).encode()
        self._request = (
            f"POST /db/execute HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = b""

    def write(self) -> None:
        """One INSERT, its reply read whole; raises if rqlite did not apply it."""
        self._sock.sendall(self._request)
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            self._buffer += self._receive()
        head, self._buffer = self._buffer[:end], self._buffer[end + 4 :]
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self._buffer) < length:
            self._buffer += self._receive()
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        if not head.startswith(b"HTTP/1.1 200") or b'"error"' in body:
            raise RuntimeError(f"the floor's write failed: {head[:40]!r} {body[:200]!r}")

    def _receive(self) -> bytes:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionError("rqlite closed the floor client's connection")
        return chunk

    def close(self) -> None:
        self._sock.close()


def floor_slice(
    url: str, seconds: float, samples_into: list[float] | None = None
) -> dict[str, Any]:
    """Writes for ``seconds`` through a new :class:`FloorClient` (after one untimed write
    that opens the connection): how many, how fast, their latency."""
    client = FloorClient(url)
    samples: list[float] = []
    try:
        client.write()
        started = time.perf_counter()
        deadline = started + seconds
        while (now := time.perf_counter()) < deadline:
            client.write()
            samples.append(time.perf_counter() - now)
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    if samples_into is not None:
        samples_into.extend(samples)
    return {
        "writes": len(samples),
        "seconds": round(elapsed, 3),
        "writes_per_s": round(len(samples) / elapsed, 1) if elapsed > 0 else 0.0,
        "latency": latency.summary_ms(samples),
    }


def main() -> None:
    import httpx

    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__)
    parser.add_argument("--url", required=True, help="the leader's base URL")
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    httpx.post(args.url.rstrip("/") + "/db/execute", json=[[SCHEMA]], timeout=30).raise_for_status()
    print(json.dumps(floor_slice(args.url, args.seconds)))


if __name__ == "__main__":
    main()
