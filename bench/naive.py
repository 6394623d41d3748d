"""The baseline: the lease-based queue protocol raftflow started from, implemented
literally over plain HTTP statements, running the same E x K workload as raftflow.

Tables are prefixed ``naive_`` so they never touch raftflow's schema. Per step a naive
worker sends, each as its own request:

1. claim: the spec's ``UPDATE ... WHERE seq = (SELECT ... NOT IN (...) ORDER BY ...)``
   (a Raft entry, even when it leases nothing),
2. the read-back ``SELECT ... WHERE locked_by = token`` at ``level=strong`` (a Raft entry),
3. ``UPDATE groups SET last_claimed_at`` (a Raft entry),
4. the step's checkpoint ``INSERT`` (a Raft entry),
5. publish of the next step's event: ``INSERT`` message + ``INSERT OR IGNORE`` group
   (one request, a Raft entry; none after the last step),
6. ack: ``DELETE`` message + ``DELETE`` group if empty (one request, a Raft entry).

Publishing before the ack keeps the order: the group stays blocked by its leased message.
There are no execution records (raftflow writes a final status too), so the baseline is
charged a little less than raftflow for the same work.

    python -m bench.naive --url http://127.0.0.1:4001 --concurrency 16 --out n0.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sys
import time
import uuid
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
from bench.counting import Tally

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS naive_messages (
      seq INTEGER PRIMARY KEY AUTOINCREMENT, group_id TEXT NOT NULL, event TEXT NOT NULL,
      locked_by TEXT, lock_expiry REAL)""",
    """CREATE TABLE IF NOT EXISTS naive_groups (
      group_id TEXT PRIMARY KEY, last_claimed_at REAL NOT NULL DEFAULT 0.0,
      priority INT NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS naive_checkpoints (
      execution_id TEXT NOT NULL, idx INTEGER NOT NULL, output TEXT,
      started_at REAL NOT NULL, ended_at REAL NOT NULL, worker_id TEXT NOT NULL,
      PRIMARY KEY (execution_id, idx))""",
)

PUBLISH = (
    "INSERT INTO naive_messages (group_id, event) VALUES (?, ?)",
    "INSERT OR IGNORE INTO naive_groups (group_id, priority) VALUES (?, ?)",
)
CLAIM = """UPDATE naive_messages SET locked_by = ?, lock_expiry = ?
  WHERE seq = (
    SELECT m.seq FROM naive_messages m JOIN naive_groups g ON g.group_id = m.group_id
    WHERE (m.locked_by IS NULL OR m.lock_expiry < ?)
      AND m.group_id NOT IN (
        SELECT group_id FROM naive_messages WHERE locked_by IS NOT NULL AND lock_expiry >= ?)
      AND g.priority >= ?
    ORDER BY g.last_claimed_at ASC, m.seq ASC LIMIT 1)"""
READ_BACK = "SELECT seq, group_id, event FROM naive_messages WHERE locked_by = ?"
TOUCH_GROUP = "UPDATE naive_groups SET last_claimed_at = ? WHERE group_id = ?"
CHECKPOINT = (
    "INSERT INTO naive_checkpoints (execution_id, idx, output, started_at, ended_at, "
    "worker_id) VALUES (?, ?, ?, ?, ?, ?)"
)
ACK = (
    "DELETE FROM naive_messages WHERE seq = ?",
    "DELETE FROM naive_groups WHERE group_id = ? "
    "AND NOT EXISTS (SELECT 1 FROM naive_messages WHERE group_id = ?)",
)


def publish_statements(execution_id: str, step: int, steps: int, sleep: float) -> list[list[Any]]:
    event = json.dumps({"execution": execution_id, "step": step, "steps": steps, "sleep": sleep})
    return [[PUBLISH[0], execution_id, event], [PUBLISH[1], execution_id, 0]]


class NaiveError(RuntimeError):
    pass


class NaiveWorker:
    def __init__(
        self, url: str, concurrency: int, worker_id: str, visibility: float = 30.0
    ) -> None:
        self.base = url.rstrip("/")
        self.concurrency = concurrency
        self.worker_id = worker_id
        self.visibility = visibility
        self.tally = Tally()
        self.steps = 0
        self.marks: list[dict[str, Any]] = []
        self.stopping = asyncio.Event()

    # -- the spec's two HTTP helpers, counted --------------------------------------------

    async def _execute(
        self, http: httpx.AsyncClient, kind: str, statements: list[list[Any]]
    ) -> list[dict[str, Any]]:
        started = time.perf_counter()
        response = await http.post(self.base + "/db/execute", json=statements)
        results = self._results(response)
        self.tally.record(
            kind, raft=True, statements=len(statements), seconds=time.perf_counter() - started
        )
        return results

    async def _query(
        self, http: httpx.AsyncClient, kind: str, sql: str, *params: Any
    ) -> list[list[Any]]:
        started = time.perf_counter()
        response = await http.post(
            self.base + "/db/query", params={"level": "strong"}, json=[[sql, *params]]
        )
        results = self._results(response)
        self.tally.record(kind, raft=True, statements=1, seconds=time.perf_counter() - started)
        values: list[list[Any]] = results[0].get("values") or []
        return values

    @staticmethod
    def _results(response: httpx.Response) -> list[dict[str, Any]]:
        if response.status_code != 200:
            raise NaiveError(f"HTTP {response.status_code}: {response.text[:200]}")
        body = response.json()
        if body.get("error"):
            raise NaiveError(str(body["error"]))
        results: list[dict[str, Any]] = body.get("results", [])
        for result in results:
            if result.get("error"):
                raise NaiveError(str(result["error"]))
        return results

    # -- the protocol ----------------------------------------------------------------------

    async def claim(self, http: httpx.AsyncClient) -> tuple[int, str, dict[str, Any], str] | None:
        token = f"{self.worker_id}:{uuid.uuid4().hex}"
        now = time.time()
        statement = [CLAIM, token, now + self.visibility, now, now, 0]
        started = time.perf_counter()
        response = await http.post(self.base + "/db/execute", json=[statement])
        result = self._results(response)[0]
        seconds = time.perf_counter() - started
        if not result.get("rows_affected"):
            self.tally.record("naive.claim_empty", raft=True, statements=1, seconds=seconds)
            return None
        self.tally.record("naive.claim", raft=True, statements=1, seconds=seconds)
        rows = await self._query(http, "naive.read_back", READ_BACK, token)
        if not rows:
            raise NaiveError(f"claimed with {token} but read nothing back")
        seq, group_id, event = rows[0]
        await self._execute(http, "naive.touch_group", [[TOUCH_GROUP, time.time(), group_id]])
        return seq, group_id, json.loads(event), token

    async def consume(self) -> None:
        """One consumer: its own kept-alive client, one claim and one step at a time.

        (One client per consumer, like one transport per consumer: a client shared by
        16 concurrent consumers costs more CPU per request in httpcore's pool than the
        protocol itself.)"""
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx.AsyncClient(limits=limits, timeout=30.0) as http:
            await self._consume(http)

    async def _consume(self, http: httpx.AsyncClient) -> None:
        poll = 0.02
        while not self.stopping.is_set():
            try:
                claimed = await self.claim(http)
            except (NaiveError, httpx.HTTPError) as exc:
                print(f"naive claim failed: {exc}", file=sys.stderr, flush=True)
                await asyncio.sleep(0.5)
                continue
            if claimed is None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), poll)
                poll = min(poll * 2, 0.5)
                continue
            poll = 0.02
            seq, group_id, event, _token = claimed
            index, steps, sleep = event["step"], event["steps"], event["sleep"]
            started = time.time()
            if sleep > 0:
                await asyncio.sleep(sleep)
            ended = time.time()
            await self._execute(
                http,
                "naive.checkpoint",
                [[CHECKPOINT, group_id, index, json.dumps(index), started, ended, self.worker_id]],
            )
            if index + 1 < steps:
                await self._execute(
                    http, "naive.publish", publish_statements(group_id, index + 1, steps, sleep)
                )
            await self._execute(http, "naive.ack", [[ACK[0], seq], [ACK[1], group_id, group_id]])
            self.steps += 1

    def mark(self) -> None:
        self.marks.append(
            {
                "t": time.time(),
                "steps": self.steps,
                "tally": self.tally.snapshot(),
                "round_trips": sum(self.tally.requests.values()),
                "cpu": process_times(),
            }
        )

    async def run(self) -> None:
        install_handlers(asyncio.get_running_loop(), self.mark, self.stopping.set)
        announce("READY")
        await asyncio.gather(*(self.consume() for _ in range(self.concurrency)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.naive")
    parser.add_argument("--url", required=True, help="the node this worker talks to")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--worker-id", default=None)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    worker_id = args.worker_id or f"{socket.gethostname()}:{os.getpid()}:naive"
    worker = NaiveWorker(args.url.split(",")[0], args.concurrency, worker_id)
    asyncio.run(worker.run())
    ignore_signals()
    worker.mark()
    final = worker.marks.pop()
    write_json(
        args.out,
        {
            "worker_id": worker_id,
            "marks": worker.marks,
            "final": final,
            "samples": {k: [round(x, 6) for x in v] for k, v in worker.tally.samples.items()},
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
