"""raftflow's own HTTP/1.1 client (transports/rqlite/wire.py) against real rqlite nodes:
replies are complete and never crossed, a connection is reused only when it is sound, and
failures are classified as httpx's are (``sent`` false only when nothing was connected)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from raftflow.transports.rqlite.local import LocalCluster
from raftflow.transports.rqlite.protocol import HttpCall, HttpReply, NetworkFailure, RqliteConfig
from raftflow.transports.rqlite.wire import AsyncWire, SyncWire

from tests.support import LoopThread


def query(node: str, sql: str, timeout: float = 10.0) -> HttpCall:
    body = json.dumps([[sql]]).encode()
    return HttpCall(node, "/db/query", {"level": "weak"}, body, timeout)


def values(reply: HttpReply | NetworkFailure) -> list[list[Any]]:
    assert isinstance(reply, HttpReply), reply
    assert reply.status == 200, reply
    (result,) = json.loads(reply.body)["results"]
    rows: list[list[Any]] = result["values"]
    return rows


@pytest.fixture
def wires(loop_thread: LoopThread) -> Iterator[Callable[[str], Any]]:
    """``wire(kind)``: a sync or an async driver with a sync ``call``; closed at teardown."""
    opened: list[Any] = []

    def make(kind: str, nodes: tuple[str, ...] = ("http://127.0.0.1:1",)) -> Any:
        config = RqliteConfig(nodes=nodes)
        if kind == "sync":
            wire: Any = SyncWire(config)
            opened.append(wire)
            return wire
        driver = AsyncWire(config)
        opened.append(driver)
        return _SyncCall(driver, loop_thread)

    yield make
    for wire in opened:
        if isinstance(wire, AsyncWire):
            loop_thread.run(wire.close())
        else:
            wire.close()


class _SyncCall:
    def __init__(self, driver: AsyncWire, loop: LoopThread) -> None:
        self.driver, self.loop = driver, loop

    def call(self, call: HttpCall) -> HttpReply | NetworkFailure:
        return self.loop.run(self.driver.call(call))


KINDS = ["sync", "async"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_large_chunked_reply_arrives_whole(
    kind: str, rqlite_node: LocalCluster, wires: Callable[[str], Any]
) -> None:
    # ~400 kB of JSON: rqlite streams it chunked, over many reads.
    sql = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000) "
        "SELECT i, printf('%080d', i) FROM n"
    )
    wire = wires(kind)
    reply = wire.call(query(rqlite_node.url, sql))
    assert isinstance(reply, HttpReply)
    expected = httpx.post(
        rqlite_node.url + "/db/query", params={"level": "weak"}, json=[[sql]]
    ).json()
    rows = values(reply)
    assert rows == expected["results"][0]["values"]
    assert len(rows) == 4000 and rows[-1] == [4000, f"{4000:080d}"]
    # The connection went back to the pool in a clean state: the next reply is its own.
    assert values(wire.call(query(rqlite_node.url, "SELECT 'next'"))) == [["next"]]


def test_concurrent_async_requests_each_get_their_own_reply(
    rqlite_node: LocalCluster, loop_thread: LoopThread
) -> None:
    async def run() -> list[Any]:
        wire = AsyncWire(RqliteConfig(nodes=(rqlite_node.url,)))
        try:
            calls = [wire.call(query(rqlite_node.url, f"SELECT {n}")) for n in range(60)]
            first = await asyncio.gather(*calls)
            # Again on the pooled connections: no reply is read by another request.
            calls = [wire.call(query(rqlite_node.url, f"SELECT {n}")) for n in range(60)]
            return [*first, *(await asyncio.gather(*calls))]
        finally:
            await wire.close()

    replies = loop_thread.run(run())
    assert [values(r) for r in replies] == [[[n]] for n in range(60)] * 2


def test_threads_share_a_sync_driver_without_crossing_replies(rqlite_node: LocalCluster) -> None:
    wire = SyncWire(RqliteConfig(nodes=(rqlite_node.url,)))
    wrong: list[Any] = []

    def client(k: int) -> None:
        for n in range(40):
            got = values(wire.call(query(rqlite_node.url, f"SELECT {k * 1000 + n}")))
            if got != [[k * 1000 + n]]:
                wrong.append((k, n, got))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        wire.close()
    assert wrong == []


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_listening_is_a_failure_not_sent(kind: str, wires: Callable[[str], Any]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reply = wires(kind).call(query(f"http://127.0.0.1:{port}", "SELECT 1"))
    assert isinstance(reply, NetworkFailure)
    assert reply.sent is False and not reply.untrusted


@pytest.mark.parametrize("kind", KINDS)
def test_a_node_that_closes_at_once_is_a_failure_sent(
    kind: str, wires: Callable[[str], Any]
) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def close_each() -> None:
            with contextlib.suppress(OSError):
                while True:
                    connection, _ = server.accept()
                    connection.close()

        threading.Thread(target=close_each, daemon=True).start()
        node = f"http://127.0.0.1:{server.getsockname()[1]}"
        reply = wires(kind, (node,)).call(query(node, "SELECT 1", timeout=30))
    assert isinstance(reply, NetworkFailure)
    assert reply.sent is True and not reply.untrusted
    assert "Timeout" not in reply.detail  # the closed connection said so, not the clock


@pytest.fixture
def lone_node(rqlite_cluster_factory: Any) -> LocalCluster:
    cluster: LocalCluster = rqlite_cluster_factory(1)
    return cluster


@pytest.mark.parametrize("kind", KINDS)
def test_a_connection_the_node_closed_is_not_reused(
    kind: str, lone_node: LocalCluster, wires: Callable[..., Any]
) -> None:
    url = lone_node.url
    wire = wires(kind, (url,))
    assert values(wire.call(query(url, "SELECT 1"))) == [[1]]  # one pooled connection
    lone_node.restart(lone_node.nodes[0])  # the node closes it
    # Not a failure: the closed connection is seen before use and a new one is made.
    assert values(wire.call(query(url, "SELECT 2"))) == [[2]]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hung_node_times_out_as_sent_and_its_late_reply_is_never_read(
    kind: str, lone_node: LocalCluster, wires: Callable[..., Any]
) -> None:
    url, node = lone_node.url, lone_node.nodes[0]
    wire = wires(kind, (url,))
    assert values(wire.call(query(url, "SELECT 0"))) == [[0]]
    lone_node.pause(node)
    try:
        started = time.monotonic()
        reply = wire.call(query(url, "SELECT 'late'", timeout=0.5))
        took = time.monotonic() - started
    finally:
        lone_node.resume(node)
    assert isinstance(reply, NetworkFailure) and reply.sent is True
    assert 0.4 < took < 30  # its timeout (0.5 s), not the hung node's silence
    # The node now answers the timed-out request too: on a connection that was closed,
    # so the next request's reply is its own.
    assert values(wire.call(query(url, "SELECT 'next'"))) == [["next"]]


def test_a_cancelled_request_leaves_no_connection_to_be_misread(
    lone_node: LocalCluster, loop_thread: LoopThread
) -> None:
    url, node = lone_node.url, lone_node.nodes[0]

    async def run() -> list[list[Any]]:
        wire = AsyncWire(RqliteConfig(nodes=(url,)))
        try:
            values(await wire.call(query(url, "SELECT 0")))
            lone_node.pause(node)
            try:
                task = asyncio.ensure_future(wire.call(query(url, "SELECT 'cancelled'")))
                await asyncio.sleep(0.3)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                lone_node.resume(node)
            await asyncio.sleep(0.2)  # the node answers the cancelled request now
            return values(await wire.call(query(url, "SELECT 'mine'")))
        finally:
            await wire.close()

    assert loop_thread.run(run()) == [["mine"]]
