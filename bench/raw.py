"""The raw ceiling: a process of ``--concurrency`` clients, each POSTing one
single-statement ``INSERT INTO bench_raw`` after another to ``/db/execute`` through its
own kept-alive ``httpx.AsyncClient`` (one connection). It counts the writes that
succeeded; the parent reads the counts at two marks, so the rate excludes start-up and
shutdown.

One client each rather than one shared client: httpcore's connection pool does work
proportional to the requests in flight on every request, and with 16 in flight on one
client this machine spent 5.4 ms of client CPU per request (156 writes/s) instead of
2.1 ms (365 writes/s): the ceiling measured the client, not rqlite.

    python -m bench.raw --url http://127.0.0.1:4001 --concurrency 16 --out raw.json
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

import httpx

from bench.children import (
    announce,
    ignore_signals,
    install_handlers,
    process_times,
    write_json,
)

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS bench_raw "
    "(id INTEGER PRIMARY KEY, client TEXT NOT NULL, v INTEGER NOT NULL)"
)
INSERT = "INSERT INTO bench_raw (client, v) VALUES (?, ?)"


class RawClients:
    def __init__(self, url: str, concurrency: int, name: str) -> None:
        self.url = url.rstrip("/") + "/db/execute"
        self.concurrency = concurrency
        self.name = name
        self.ok = 0
        self.errors = 0
        self.latencies: list[float] = []
        self.marks: list[dict[str, Any]] = []
        self.stopping = asyncio.Event()
        self.ready = 0

    def mark(self) -> None:
        self.marks.append(
            {
                "t": time.time(),
                "ok": self.ok,
                "errors": self.errors,
                "samples": len(self.latencies),
                "cpu": process_times(),
            }
        )

    async def _client(self, index: int) -> None:
        async with httpx.AsyncClient(
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1), timeout=30.0
        ) as http:
            await http.post(self.url, json=[[INSERT, "warmup", 0]])  # open the connection
            self.ready += 1
            if self.ready == self.concurrency:
                announce("READY")
            await self._loop(http, index)

    async def _loop(self, http: httpx.AsyncClient, index: int) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1
            started = time.perf_counter()
            try:
                response = await http.post(self.url, json=[[INSERT, f"{self.name}.{index}", n]])
                body = response.json()
                failed = (
                    response.status_code != 200
                    or "error" in body
                    or any("error" in r for r in body.get("results", []))
                )
            except (httpx.HTTPError, ValueError):
                failed = True
            if failed:
                self.errors += 1
                await asyncio.sleep(0.01)
                continue
            self.ok += 1
            self.latencies.append(time.perf_counter() - started)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        install_handlers(loop, self.mark, self.stopping.set)
        await asyncio.gather(*(self._client(i) for i in range(self.concurrency)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.raw")
    parser.add_argument("--url", required=True, help="one node's base URL")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--name", default="raw")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    clients = RawClients(args.url, args.concurrency, args.name)
    asyncio.run(clients.run())
    ignore_signals()
    write_json(
        args.out,
        {
            "marks": clients.marks,
            "ok": clients.ok,
            "errors": clients.errors,
            "latencies": [round(x, 6) for x in clients.latencies],
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
