"""Queue consumers and producers as real OS processes, for the concurrency tests.

    python -m tests.integration.queue_worker consume --urls U1,U2,U3 --kind httpx \\
        --out records.jsonl --go GO_FILE --stop STOP_FILE [--tasks 3] [--work-ms 3]
    python -m tests.integration.queue_worker produce --urls U1,U2,U3 --kind requests \\
        --plan plan.json --go GO_FILE

Every process opens its own transport (``--kind``: raftflow, httpx, requests, async or
async-httpx) through the node list in the order given, waits for ``GO_FILE`` (so that they
all start together once imported), then works. A consumer claims, "processes" a message by sleeping
``--work-ms``, appends one JSON line ``{uid, group, i, seq, attempts, start, end, pid,
worker}`` to ``--out`` *before* acking, and stops once ``STOP_FILE`` exists and nothing is
claimable. Times are ``time.monotonic()``, one clock for every process of the machine.
Any exception ends the process with a traceback and a non-zero status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any, TextIO

from raftflow.transports.rqlite import AsyncRqliteTransport, RqliteTransport

VISIBILITY = 30.0


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(0.005)


def _record(out: TextIO, worker: str, lease: Any, start: float, end: float) -> None:
    event = lease.event
    line = {
        "uid": event["uid"],
        "group": lease.group_id,
        "i": event["i"],
        "seq": lease.seq,
        "attempts": lease.attempts,
        "start": start,
        "end": end,
        "pid": os.getpid(),
        "worker": worker,
    }
    out.write(json.dumps(line) + "\n")
    out.flush()


def _summary(out: TextIO, worker: str, node: str, handled: int) -> None:
    out.write(json.dumps({"summary": worker, "node": node, "handled": handled}) + "\n")
    out.flush()


def consume_sync(args: argparse.Namespace) -> None:
    transport = RqliteTransport.from_url(args.urls, http=args.kind, create_schema=False)
    stop, work = Path(args.stop), args.work_ms / 1000
    handled = 0
    with transport, open(args.out, "a", encoding="utf-8") as out:
        _wait_for(Path(args.go))
        while True:
            lease = transport.claim(args.worker, VISIBILITY)
            if lease is None:
                if stop.exists() and not transport.claimable():
                    break
                time.sleep(0.005)
                continue
            start = time.monotonic()
            time.sleep(work)
            end = time.monotonic()
            _record(out, args.worker, lease, start, end)
            transport.ack(lease)
            handled += 1
        _summary(out, args.worker, transport.connection.ring.node(), handled)


async def consume_async(args: argparse.Namespace) -> None:
    http = "httpx" if args.kind == "async-httpx" else "raftflow"
    transport = await AsyncRqliteTransport.from_url(args.urls, http=http, create_schema=False)
    stop, work = Path(args.stop), args.work_ms / 1000
    async with transport:
        with open(args.out, "a", encoding="utf-8") as out:
            _wait_for(Path(args.go))

            async def task(name: str) -> int:
                handled = 0
                while True:
                    lease = await transport.claim(name, VISIBILITY)
                    if lease is None:
                        if stop.exists() and not await transport.claimable():
                            return handled
                        await asyncio.sleep(0.005)
                        continue
                    start = time.monotonic()
                    await asyncio.sleep(work)
                    end = time.monotonic()
                    _record(out, name, lease, start, end)
                    await transport.ack(lease)
                    handled += 1

            names = [f"{args.worker}.{n}" for n in range(args.tasks)]
            counts = await asyncio.gather(*(task(name) for name in names))
            _summary(out, args.worker, transport.connection.ring.node(), sum(counts))


def produce(args: argparse.Namespace) -> None:
    plan = json.loads(Path(args.plan).read_text())
    with RqliteTransport.from_url(args.urls, http=args.kind, create_schema=False) as transport:
        _wait_for(Path(args.go))
        for group, index in plan:
            uid = f"{group}:{index}"
            transport.publish(group, {"uid": uid, "i": index}, key=uid)
            time.sleep(0.001)


KINDS = ["raftflow", "httpx", "requests", "async", "async-httpx"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.integration.queue_worker")
    parser.add_argument("role", choices=["consume", "produce"])
    parser.add_argument("--urls", required=True, type=lambda s: s.split(","))
    parser.add_argument("--kind", choices=KINDS, default="raftflow")
    parser.add_argument("--go", required=True)
    parser.add_argument("--stop")
    parser.add_argument("--out")
    parser.add_argument("--plan")
    parser.add_argument("--worker", default=f"pid{os.getpid()}")
    parser.add_argument("--tasks", type=int, default=1)
    parser.add_argument("--work-ms", type=float, default=3.0)
    args = parser.parse_args(argv)
    if args.role == "produce":
        produce(args)
    elif args.kind.startswith("async"):
        asyncio.run(consume_async(args))
    else:
        consume_sync(args)


if __name__ == "__main__":
    main()
