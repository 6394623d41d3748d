"""A 1-step workflow's ``start() -> result()`` in-process, hop by hop (docs/performance.md,
"Where a 1-step workflow's time goes").

``python -m bench.probe_start_result [--executions N] [--sync]`` starts a local 3-node rqlite
cluster and an in-process worker of concurrency 1, runs 20 untimed 1-step workflows, then N
timed ones one after another, each ``engine.start(...).result()``, and records a
``perf_counter_ns`` timestamp at each hop (by wrapping the engine's functions here: the
engine's code is not changed). It prints the median microseconds from each hop to the next,
every wire request made between ``start()`` and ``result()``'s return (by thread and
endpoint), the floor (bench/floor.py) measured after them, and what the same two requests
take alone, sent again through a floor client (bench/replay_writes.py).

The hops, in order: ``start()`` called; its request: the driver entered, the bytes built,
the reply's bytes in, the reply returned; the worker adopts the execution (``start()``'s
thread); ``start()`` returns; ``result()`` called; the worker's loop runs the adoption; the
turn's task begins; the workflow function entered; the step ran; the commit handed to the
host; its request (the same four marks); the waiters told (the turn's end); ``result()``
woken; ``result()`` returns.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
from raftflow.engine.runtime import dispatch, host, local, run
from raftflow.transports.rqlite import framing, wire
from raftflow.transports.rqlite.local import LocalCluster

from bench.floor import SCHEMA as FLOOR_SCHEMA
from bench.floor import floor_slice
from bench.replay_writes import replay
from raftflow import Engine

#: Each timed execution's marks: (hop, ns), appended from any thread (list.append is atomic).
MARKS: list[tuple[str, int]] = []
#: Each wire request of a timed execution: (thread, path, body snippet, sent ns, replied ns).
REQUESTS: list[tuple[str, str, bytes, int, int]] = []
#: The framing's marks of a timed execution: (thread, what, ns).
WIRE: list[tuple[str, str, int]] = []
#: What each thread's request in flight is ("start", "commit" or "").
PENDING: dict[str, str] = {}
#: One execution's start and commit requests, and its start's reply (the replay's input).
CAPTURED: dict[str, bytes] = {}
recording = False


def mark(hop: str) -> None:
    if recording:
        MARKS.append((hop, time.perf_counter_ns()))


def _wrap_sync(cls: Any, name: str, hop: str, after: bool = False) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not after:
            mark(hop)
        result = original(*args, **kwargs)
        if after:
            mark(hop)
        return result

    setattr(cls, name, wrapper)


def _wrap_async(cls: Any, name: str, hop: str) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(hop)
        return await original(*args, **kwargs)

    setattr(cls, name, wrapper)


def _wire_call(original: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
    def record(call: Any, sent: int) -> None:
        if recording:
            body = (call.body or b"")[:60]
            REQUESTS.append(
                (threading.current_thread().name, call.path, body, sent, time.perf_counter_ns())
            )

    if is_async:

        async def acall(self: Any, call: Any) -> Any:
            sent = time.perf_counter_ns()
            reply = await original(self, call)
            record(call, sent)
            return reply

        return acall

    def scall(self: Any, call: Any) -> Any:
        sent = time.perf_counter_ns()
        reply = original(self, call)
        record(call, sent)
        return reply

    return scall


def _kind_of(body: bytes) -> str:
    """A request's kind by its first statement: a start, an outcome's commit, or other."""
    if body.startswith(b'[["INSERT INTO executions'):
        return "start"
    if body.startswith(b'[["REPLACE INTO executions') and b"DELETE FROM messages" in body:
        return "commit"
    return ""


def _wrap_framing() -> None:
    """The request's bytes built, and its reply's bytes in (the first read of them)."""
    request, feed = framing.Framing.request, framing.Framing.feed

    def built(self: Any, call: Any, origin: Any, authorization: Any) -> bytes:
        data: bytes = request(self, call, origin, authorization)
        if recording:
            WIRE.append((threading.current_thread().name, "bytes built", time.perf_counter_ns()))
            kind = _kind_of(call.body or b"")
            PENDING[threading.current_thread().name] = kind
            if kind:
                CAPTURED[kind] = data
        return data

    def fed(self: Any, data: bytes) -> Any:
        if recording:
            WIRE.append((threading.current_thread().name, "reply bytes in", time.perf_counter_ns()))
            if PENDING.get(threading.current_thread().name) == "start":
                CAPTURED["start reply"] = bytes(data)
        return feed(self, data)

    framing.Framing.request = built  # type: ignore[method-assign]
    framing.Framing.feed = fed  # type: ignore[method-assign]


def instrument() -> None:
    wire.SyncWire.call = _wire_call(wire.SyncWire.call, False)  # type: ignore[method-assign]
    wire.AsyncWire.call = _wire_call(wire.AsyncWire.call, True)  # type: ignore[method-assign]
    _wrap_framing()
    _wrap_sync(run.WorkerRun, "adopt", "adopt (start's thread)")
    _wrap_sync(run.WorkerRun, "_adopt", "loop runs the adoption")
    _wrap_async(dispatch.Dispatcher, "handle", "turn task begins")
    _wrap_async(host.RunHost, "commit", "commit handed to host")
    _wrap_sync(local.LocalWorkers, "release", "waiters told (release)")
    _wrap_sync(local.LocalWorkers, "wait", "result() woken", after=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.probe_start_result", description=__doc__)
    parser.add_argument("--executions", type=int, default=400)
    parser.add_argument("--sync", action="store_true", help="a sync workflow and a sync step")
    parser.add_argument(
        "--replays", type=int, default=400, help="the two requests alone (bench/replay_writes.py)"
    )
    args = parser.parse_args()
    instrument()
    global recording
    with LocalCluster(3) as cluster:
        engine = Engine.from_url(cluster.urls)

        @engine.step
        async def tick(i: int) -> int:
            mark("step ran")
            return i + 1

        @engine.workflow
        async def one(i: int) -> int:
            mark("workflow entered")
            return await tick(i)

        @engine.step
        def tick_sync(i: int) -> int:
            mark("step ran")
            return i + 1

        @engine.workflow
        def one_sync(i: int) -> int:
            mark("workflow entered")
            return tick_sync(i)

        workflow: Any = one_sync if args.sync else one
        per_hop: dict[tuple[str, str], list[int]] = {}
        totals: list[int] = []
        requests: Counter[tuple[str, str, str]] = Counter()
        orders: Counter[tuple[str, ...]] = Counter()
        try:
            with engine.running_worker(concurrency=1):
                for i in range(20):
                    engine.start(workflow, i).result(timeout=30)
                for i in range(args.executions):
                    MARKS.clear()
                    REQUESTS.clear()
                    WIRE.clear()
                    recording = True
                    MARKS.append(("start() called", time.perf_counter_ns()))
                    handle = engine.start(workflow, i)
                    MARKS.append(("start() returns", time.perf_counter_ns()))
                    MARKS.append(("result() called", time.perf_counter_ns()))
                    handle.result(timeout=30)
                    MARKS.append(("result() returns", time.perf_counter_ns()))
                    recording = False
                    _collect(per_hop, totals, requests, orders)
            leader = cluster.leader().url
            httpx.post(leader + "/db/execute", json=[[FLOOR_SCHEMA]], timeout=30)
            floor = floor_slice(leader, 2.0)
            reply = json.loads(CAPTURED["start reply"].split(b"\r\n\r\n", 1)[1])
            alone = replay(
                leader,
                CAPTURED["start"],
                int(reply["results"][-1]["last_insert_id"]),
                CAPTURED["commit"],
                args.replays,
            )
        finally:
            engine.close()
    _print(args, per_hop, totals, requests, orders, floor)
    print(
        f"the same two requests alone ({args.replays} times, start then commit, "
        f"through a floor client): start p50 {alone['start']:.0f} us, "
        f"commit p50 {alone['commit']:.0f} us"
    )


def _collect(
    per_hop: dict[tuple[str, str], list[int]],
    totals: list[int],
    requests: Counter[tuple[str, str, str]],
    orders: Counter[tuple[str, ...]],
) -> None:
    """One execution's marks, ordered, into the per-hop lists; its requests by kind."""
    marks = list(MARKS)
    commit_from = _first(marks, "commit handed to host")
    for thread, path, body, sent, replied in REQUESTS:
        if thread == "MainThread" and path == "/db/execute":
            kind = "start"
        elif thread != "MainThread" and path == "/db/execute" and sent >= commit_from:
            kind = "commit"
        else:
            kind = ""
        what = kind or body[:40].decode(errors="replace")
        requests[(thread.split("_")[0], path, what)] += 1
        if not kind:
            continue
        marks += [(f"{kind} request: driver entered", sent), (f"{kind} reply returned", replied)]
        for wire_thread, step, ns in WIRE:
            if wire_thread == thread and sent <= ns <= replied:
                marks.append((f"{kind} {step}", ns))
    seen: dict[str, int] = {}
    for hop, ns in sorted(marks, key=lambda m: m[1]):
        seen.setdefault(hop, ns)
    order = tuple(hop for hop, _ in sorted(seen.items(), key=lambda kv: kv[1]))
    orders[order] += 1
    for a, b in itertools.pairwise(order):
        per_hop.setdefault((a, b), []).append(seen[b] - seen[a])
    totals.append(seen["result() returns"] - seen["start() called"])


def _first(marks: list[tuple[str, int]], hop: str) -> int:
    return min((ns for h, ns in marks if h == hop), default=1 << 62)


def _print(
    args: argparse.Namespace,
    per_hop: dict[tuple[str, str], list[int]],
    totals: list[int],
    requests: Counter[tuple[str, str, str]],
    orders: Counter[tuple[str, ...]],
    floor: dict[str, Any],
) -> None:
    n = args.executions
    kind = "sync" if args.sync else "async"
    print(f"{n} 1-step {kind} workflows, start() -> result(), worker in this process")
    order, count = orders.most_common(1)[0]
    print(f"hop order of {count} of {n} executions (the others: {len(orders) - 1} other orders)")
    print(f"  {'from':<32} {'to':<32} {'p50 us':>8} {'n':>5}")
    for a, b in itertools.pairwise(order):
        values = per_hop.get((a, b), [])
        print(f"  {a:<32} {b:<32} {statistics.median(values) / 1000:8.0f} {len(values):5d}")
    print(f"  start() -> result() returns: p50 {statistics.median(totals) / 1000:.0f} us")
    print(f"wire requests per execution (between start() and result()'s return), of {n}:")
    for (thread, path, what), count in sorted(requests.items()):
        print(f"  {count / n:5.2f}  {thread:<20} {path:<14} {what}")
    print(f"floor, 2 s beside it: p50 {floor['latency']['p50_ms'] * 1000:.0f} us")
    print(
        f"start() -> result() p50 / floor p50: "
        f"{statistics.median(totals) / 1e6 / floor['latency']['p50_ms']:.2f}x"
    )


if __name__ == "__main__":
    main()
