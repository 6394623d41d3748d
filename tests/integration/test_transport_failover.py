"""The transport across real cluster faults: late start, no cluster, dead nodes (kill -9).

Every test runs its own cluster from ``rqlite_cluster_factory`` (stopped at teardown,
pass or fail) and covers the three ways to talk to rqlite -- the sync transport on
httpx and on requests, and the async twin -- side by side on that one cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from raftflow.transports.contract import QueueStats
from raftflow.transports.rqlite import AsyncRqliteTransport, RqliteTransport
from raftflow.transports.rqlite.local import LocalCluster, pick_free_ports

from raftflow.errors import LeaseError, LeaseLostError, UnavailableError
from tests.integration.lossy_proxy import LossyProxy
from tests.support import LoopThread, SyncView, wait_until

KINDS = ("raftflow", "httpx", "requests", "async", "async-httpx")
ZERO = QueueStats(messages=0, leased=0, parked=0, groups=0)
#: Leases in the leader-kill test: longer than an election, short enough that a lease
#: orphaned by a claim that failed after being applied comes back within the test.
VISIBILITY = 4.0


@pytest.fixture
def open_kind(loop_thread: LoopThread) -> Iterator[Callable[..., Any]]:
    """``open_kind(kind, urls, **options)``; async twins come wrapped in a SyncView.
    Safe to call from several threads at once. Everything is closed at teardown."""
    opened: list[Any] = []
    lock = threading.Lock()

    def open_(kind: str, urls: Any, **options: Any) -> Any:
        if kind.startswith("async"):
            http = "httpx" if kind == "async-httpx" else "raftflow"
            twin = loop_thread.run(AsyncRqliteTransport.from_url(urls, http=http, **options))
            with lock:
                opened.append(twin)
            return SyncView(twin, loop_thread)
        transport = RqliteTransport.from_url(urls, http=kind, **options)
        with lock:
            opened.append(transport)
        return transport

    yield open_
    for transport in opened:
        if isinstance(transport, AsyncRqliteTransport):
            loop_thread.run(transport.close())
        else:
            transport.close()


def in_threads(calls: dict[str, Callable[[], Any]]) -> dict[str, tuple[Any, float]]:
    """Run the calls at once; each one's result (or exception) and its duration."""
    outcomes: dict[str, tuple[Any, float]] = {}

    def run(name: str, call: Callable[[], Any]) -> None:
        started = time.monotonic()
        try:
            value: Any = call()
        except BaseException as exc:
            value = exc
        outcomes[name] = (value, time.monotonic() - started)

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert set(outcomes) == set(calls), "a call did not return within 120s"
    return outcomes


def round_trip(transport: Any, group: str) -> None:
    transport.publish(group, {"via": group})
    lease = transport.claim("w", visibility=30)
    assert lease is not None and lease.event == {"via": group}
    transport.ack(lease)


# --- connecting --------------------------------------------------------------------------


@pytest.mark.slow
def test_from_url_waits_for_a_cluster_that_starts_late(
    rqlite_cluster_factory: Callable[..., LocalCluster],
    open_kind: Callable[..., Any],
    tmp_path: Path,
) -> None:
    # Fix the ports in advance: the cluster reads them from its manifest when it starts.
    ports = pick_free_ports(6)
    (tmp_path / "cluster.json").write_text(json.dumps({"size": 3, "ports": ports}))
    urls = [f"http://127.0.0.1:{port}" for port in ports[0::2]]
    started: list[Any] = []

    def start_late() -> None:
        time.sleep(2.0)
        try:
            started.append(rqlite_cluster_factory(3, base_dir=tmp_path))
        except BaseException as exc:
            started.append(exc)

    starter = threading.Thread(target=start_late)
    starter.start()
    try:
        outcomes = in_threads(
            {kind: lambda kind=kind: open_kind(kind, urls, connect_timeout=30) for kind in KINDS}
        )
    finally:
        starter.join(60)
    assert len(started) == 1 and isinstance(started[0], LocalCluster), started
    for kind, (transport, waited) in outcomes.items():
        assert not isinstance(transport, BaseException), (kind, transport)
        assert waited >= 2.0, (kind, waited)
        round_trip(transport, kind)
    assert outcomes["httpx"][0].stats() == ZERO


@pytest.mark.slow
def test_from_url_waits_for_a_leader_not_just_a_listening_node(
    rqlite_cluster_factory: Callable[..., LocalCluster], open_kind: Callable[..., Any]
) -> None:
    cluster = rqlite_cluster_factory(3)
    leader = cluster.leader()
    followers = [node for node in cluster.nodes if node is not leader]
    for follower in followers:
        cluster.kill(follower)
    # Without a quorum the survivor steps down: it listens, but there is no leader.
    wait_until(lambda: httpx.get(f"{leader.url}/readyz", timeout=1).status_code == 503, timeout=15)
    outcomes = in_threads(
        {kind: lambda kind=kind: open_kind(kind, leader.url, connect_timeout=2) for kind in KINDS}
    )
    for kind, (error, waited) in outcomes.items():
        assert isinstance(error, UnavailableError), (kind, error)
        assert "within 2s" in str(error) and "leader" in str(error), (kind, str(error))
        assert waited < 8, (kind, waited)  # its 2 s budget, not a hang
    # A follower comes back: the two elect a leader while from_url waits.
    restarter = threading.Timer(1.0, lambda: cluster.start_node(followers[0], wait=False))
    restarter.start()
    try:
        outcomes = in_threads(
            {
                kind: lambda kind=kind: open_kind(kind, leader.url, connect_timeout=30)
                for kind in KINDS
            }
        )
    finally:
        restarter.join(30)
    for kind, (transport, waited) in outcomes.items():
        assert not isinstance(transport, BaseException), (kind, transport)
        assert waited >= 1.0, (kind, waited)
        round_trip(transport, kind)


def test_from_url_gives_up_after_connect_timeout_when_nothing_listens(
    open_kind: Callable[..., Any],
) -> None:
    (port,) = pick_free_ports(1)
    url = f"http://127.0.0.1:{port}"
    outcomes = in_threads(
        {kind: lambda kind=kind: open_kind(kind, url, connect_timeout=2) for kind in KINDS}
    )
    for kind, (error, waited) in outcomes.items():
        assert isinstance(error, UnavailableError), (kind, error)
        assert "within 2s" in str(error), (kind, str(error))
        assert f"127.0.0.1:{port}" in str(error), (kind, str(error))
        assert 1.9 <= waited < 8, (kind, waited)  # its 2 s budget, not a hang


@pytest.mark.slow
def test_a_hung_node_does_not_stretch_the_budget(
    rqlite_cluster_factory: Callable[..., LocalCluster], open_kind: Callable[..., Any]
) -> None:
    """A node that accepts connections but never answers (SIGSTOP): each attempt must
    end when the budget does, not after the full per-attempt ``timeout`` (10 s)."""
    cluster = rqlite_cluster_factory(1)
    (node,) = cluster.nodes
    transports = {kind: open_kind(kind, node.url, retry_timeout=2) for kind in KINDS}
    cluster.pause(node)
    try:
        calls: dict[str, Callable[[], Any]] = {
            f"from_url-{kind}": lambda kind=kind: open_kind(kind, node.url, connect_timeout=2)
            for kind in KINDS
        }
        calls |= {
            f"publish-{kind}": lambda t=transport: t.publish("g", 1)
            for kind, transport in transports.items()
        }
        outcomes = in_threads(calls)
    finally:
        cluster.resume(node)
    for name, (error, waited) in outcomes.items():
        assert isinstance(error, UnavailableError), (name, error)
        assert "within 2s" in str(error), (name, str(error))
        assert 1.9 <= waited < 8, (name, waited)  # the 2 s budget, not a 10 s attempt


def test_requests_is_an_optional_extra(rqlite_cluster: LocalCluster) -> None:
    """Without ``requests`` installed, httpx transports work and asking for requests
    says how to install it (run in a fresh interpreter where ``import requests`` fails)."""
    script = f"""
import sys
sys.modules["requests"] = None  # what a missing package looks like to import
from raftflow.transports.rqlite import RqliteTransport
with RqliteTransport.from_url({rqlite_cluster.url!r}) as transport:
    transport.stats()
try:
    RqliteTransport.from_url({rqlite_cluster.url!r}, http="requests")
except ImportError as exc:
    print(exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'raftflow[requests]'" in done.stdout


# --- dead nodes --------------------------------------------------------------------------


@pytest.mark.slow
def test_every_node_serves_and_a_hung_or_dead_node_is_skipped(
    rqlite_cluster_factory: Callable[..., LocalCluster], open_kind: Callable[..., Any]
) -> None:
    cluster = rqlite_cluster_factory(3)
    # Any node serves every operation (followers forward to the leader).
    for node in cluster.nodes:
        for kind in KINDS:
            round_trip(open_kind(kind, node.url), f"{kind}@{node.node_id}")
    leader = cluster.leader()
    follower = next(node for node in cluster.nodes if node is not leader)
    others = [node.url for node in cluster.nodes if node is not follower]

    # A hung first node (SIGSTOP) costs one attempt's ``timeout``, then the next serves.
    cluster.pause(follower)
    try:
        for kind in KINDS:
            started = time.monotonic()
            round_trip(open_kind(kind, [follower.url, *others], timeout=1), f"hung-{kind}")
            assert time.monotonic() - started < 10, kind  # one 1 s attempt, not the budget
    finally:
        cluster.resume(follower)

    # A dead node (kill -9) that every transport was talking to.
    transports = {
        kind: open_kind(kind, [follower.url, *others], retry_timeout=10) for kind in KINDS
    }
    for kind, transport in transports.items():
        transport.publish(f"before-{kind}", kind)
        # The follower forwarded it to the leader and said so: the ring moved on to the
        # node that serves requests itself (NodeRing.forwarded).
        assert transport.connection.ring.node() == leader.url
    cluster.kill(leader)  # SIGKILL, the node every transport talks to
    consumed = []
    for kind, transport in transports.items():
        transport.publish(f"after-{kind}", kind)
        lease = transport.claim("w", visibility=30)
        transport.ack(lease)
        consumed.append(lease.group_id)
        assert transport.stats().messages == len(KINDS)  # one published, one consumed
        assert transport.connection.ring.node() != leader.url
    transport = transports["requests"]
    while (lease := transport.claim("w", visibility=30)) is not None:
        transport.ack(lease)
        consumed.append(lease.group_id)
    assert sorted(consumed) == sorted(
        f"{when}-{kind}" for when in ("before", "after") for kind in KINDS
    )
    assert transport.stats() == ZERO


class Ledger:
    """What producers and consumers saw, shared by their threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.published: dict[str, tuple[str, int]] = {}  # uid -> (group, index)
        self.published_at: list[float] = []
        self.publish_latency: list[float] = []
        self.unavailable = 0  # publishes retried with the same key after UnavailableError
        self.acked: list[tuple[str, str, int]] = []  # (uid, group, index), acked
        # (group, "claim" | "ack", index): a claim noted once it returned, an ack before it
        # is sent. The next message of a group can only be claimed once this one is acked,
        # so in this order a group's next claim always comes after its head's ack began.
        # (The acks' order as noted after they return is not the queue's: another
        # consumer may claim, ack and note the group's next message in between.)
        self.events: list[tuple[str, str, int]] = []
        self.maybe_acked: list[str] = []  # ack failed ambiguously, then the lease was gone
        self.lost: list[str] = []  # lease lapsed before the ack: will be redelivered
        self.errors: list[str] = []


def produce(transport: Any, name: str, count: int, ledger: Ledger, pace: float) -> None:
    for index in range(count):
        group = f"{name}-g{index % 4}"
        uid = f"{name}-{index}"
        started = time.monotonic()
        while True:
            try:
                transport.publish(group, {"uid": uid, "i": index}, key=uid)
                break
            except UnavailableError:
                with ledger.lock:  # "maybe published": retry with the same key
                    ledger.unavailable += 1
        with ledger.lock:
            ledger.published[uid] = (group, index)
            ledger.published_at.append(time.monotonic())
            ledger.publish_latency.append(time.monotonic() - started)
        time.sleep(pace)


def consume(transport: Any, name: str, ledger: Ledger, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            lease = transport.claim(name, visibility=VISIBILITY)
        except UnavailableError:
            continue
        if lease is None:
            time.sleep(0.02)
            continue
        uid = lease.event["uid"]
        with ledger.lock:
            ledger.events.append((lease.group_id, "claim", lease.event["i"]))
            ledger.events.append((lease.group_id, "ack", lease.event["i"]))
        outcome = None
        for attempt in range(10):
            try:
                transport.ack(lease)
                outcome = "acked"
            except UnavailableError:
                continue
            except LeaseLostError:
                outcome = "maybe" if attempt else "lost"
            except LeaseError as exc:
                outcome = "maybe" if attempt else f"error: {exc}"
            break
        with ledger.lock:
            if outcome == "acked":
                ledger.acked.append((uid, lease.group_id, lease.event["i"]))
            elif outcome == "maybe":
                ledger.maybe_acked.append(uid)
            elif outcome == "lost":
                ledger.lost.append(uid)
            else:
                ledger.errors.append(f"{name} ack of {uid}: {outcome}")


def guarded(target: Callable[..., None], ledger: Ledger, *args: Any) -> threading.Thread:
    def run() -> None:
        try:
            target(*args)
        except BaseException as exc:
            with ledger.lock:
                ledger.errors.append(f"{target.__name__}{args[1:2]}: {type(exc).__name__}: {exc}")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.slow
def test_leader_killed_mid_stream_loses_and_duplicates_nothing(
    rqlite_cluster_factory: Callable[..., LocalCluster], open_kind: Callable[..., Any]
) -> None:
    cluster = rqlite_cluster_factory(3)
    leader = cluster.leader()
    # Half of the clients talk to the leader itself, the others through a follower.
    to_leader = [leader.url] + [n.url for n in cluster.nodes if n is not leader]
    to_follower = to_leader[1:] + to_leader[:1]
    # One producer and one consumer get a retry budget shorter than the election, so
    # their calls fail with UnavailableError -- possibly after being applied -- and are
    # retried by the caller: publishes with the same key, acks with the same lease.
    patient, impatient = {"retry_timeout": 8}, {"retry_timeout": 0.5}
    producers = {
        "p-httpx": open_kind("httpx", to_leader, **impatient),
        "p-requests": open_kind("requests", to_follower, **patient),
    }
    consumers = {
        "c-httpx": open_kind("httpx", to_follower, **impatient),
        "c-async": open_kind("async", to_leader, **patient),
    }
    ledger, stop = Ledger(), threading.Event()
    count, pace = 50, 0.08
    threads = [
        guarded(produce, ledger, t, name, count, ledger, pace) for name, t in producers.items()
    ]
    workers = [guarded(consume, ledger, t, name, ledger, stop) for name, t in consumers.items()]
    try:
        time.sleep(1.0)
        killed_at = time.monotonic()
        cluster.kill(leader)
        new_leader = cluster.leader(timeout=20)
        assert new_leader is not leader
        time.sleep(0.5)
        cluster.start_node(leader)
        restarted_at = time.monotonic()
        for thread in threads:
            thread.join(90)
        assert not any(thread.is_alive() for thread in threads), "producers did not finish"
        checker = open_kind("httpx", cluster.urls, **patient)
        deadline = time.monotonic() + 60
        while checker.stats().messages and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)

    print(
        "LEDGER",
        ledger.unavailable,
        len(ledger.maybe_acked),
        len(ledger.lost),
        round(max(ledger.publish_latency), 2),
        len(ledger.acked),
        round(restarted_at - killed_at, 2),
    )
    assert ledger.errors == []
    # The stream really crossed the fault: publishes before the kill and after the
    # restart, and at least one that waited out the election inside the retry loop.
    assert any(at < killed_at for at in ledger.published_at)
    assert any(at > restarted_at for at in ledger.published_at)
    assert max(ledger.publish_latency) > 0.5, max(ledger.publish_latency)

    assert len(ledger.published) == 2 * count
    acked = Counter(uid for uid, _, _ in ledger.acked)
    assert {uid: n for uid, n in acked.items() if n > 1} == {}, "consumed twice"
    unaccounted = set(ledger.published) - set(acked) - set(ledger.maybe_acked)
    assert unaccounted == set(), f"lost: {sorted(unaccounted)}"
    assert set(acked) | set(ledger.maybe_acked) <= set(ledger.published)
    # Each group's messages were claimed in publish order, one at a time: the same one
    # again (its lease lapsed), or the next once the head's ack had begun.
    head: dict[str, int] = {}
    acking: set[tuple[str, int]] = set()
    for group, kind, index in ledger.events:
        if kind == "ack":
            acking.add((group, index))
        elif group in head and index != head[group]:
            assert index > head[group] and (group, head[group]) in acking, (group, index, head)
        if kind == "claim":
            head[group] = index
    assert checker.stats() == ZERO


# --- answers lost after rqlite applied the request ---------------------------------------


@pytest.fixture
def lossy(cluster: LocalCluster) -> Iterator[LossyProxy]:
    """A proxy in front of the shared cluster's leader (tables emptied): a connection
    stays on a node that serves requests itself, and moves on from a follower."""
    with LossyProxy(cluster.leader().http_port) as proxy:
        yield proxy


@pytest.fixture
def via_lossy(lossy: LossyProxy, cluster: LocalCluster, make_transport: Callable[..., Any]) -> Any:
    """A transport that talks to the proxy first; the retry goes to the next node."""
    leader = cluster.leader().url
    others = [url for url in cluster.urls if url != leader]
    return make_transport([lossy.url, *others], retry_timeout=10)


def test_a_publish_whose_answer_was_lost_is_not_duplicated(
    lossy: LossyProxy, via_lossy: Any
) -> None:
    lossy.lose_next("publish")
    via_lossy.publish("g", 1)
    assert lossy.lost == ["publish"]
    assert via_lossy.connection.ring.node() != lossy.url  # retried elsewhere
    assert via_lossy.stats() == QueueStats(messages=1, leased=0, parked=0, groups=1)


def test_a_claim_whose_answer_was_lost_returns_one_lease_and_frees_the_extra(
    lossy: LossyProxy, via_lossy: Any, make_transport: Callable[..., Any]
) -> None:
    via_lossy.publish("a", 1)
    via_lossy.publish("b", 1)
    lossy.lose_next("claim")
    # The lost attempt leased a; the retry, under the same token, leased b as well.
    lease = via_lossy.claim("w", visibility=30)
    assert lossy.lost == ["claim"]
    assert lease is not None and lease.group_id == "a"
    assert via_lossy.stats() == QueueStats(messages=2, leased=1, parked=0, groups=2)
    other = make_transport().claim("w2", visibility=30)  # b is free at once
    assert other is not None and other.group_id == "b"
    via_lossy.ack(lease)


def test_a_claim_many_whose_answer_was_lost_keeps_the_limit(
    lossy: LossyProxy, via_lossy: Any
) -> None:
    for group in "abcd":
        via_lossy.publish(group, 1)
    lossy.lose_next("claim")
    leases = via_lossy.claim_many("w", visibility=30, limit=2)
    assert lossy.lost == ["claim"]
    assert sorted(lease.group_id for lease in leases) == ["a", "b"]
    assert via_lossy.stats().leased == 2
    for lease in leases:
        via_lossy.ack(lease)
    assert sorted(le.group_id for le in via_lossy.claim_many("w", 30, limit=5)) == ["c", "d"]


@pytest.mark.parametrize(
    "settle, statement, after",
    [
        ("ack", "ack", QueueStats(messages=1, leased=0, parked=0, groups=1)),
        ("nack-now", "nack", QueueStats(messages=2, leased=0, parked=0, groups=1)),
        ("nack-park", "nack", QueueStats(messages=2, leased=0, parked=1, groups=1)),
        ("extend", "extend", QueueStats(messages=2, leased=1, parked=0, groups=1)),
    ],
)
def test_a_settle_whose_answer_was_lost_succeeds_on_retry(
    lossy: LossyProxy, via_lossy: Any, settle: str, statement: str, after: QueueStats
) -> None:
    via_lossy.publish("g", 1)
    via_lossy.publish("g", 2)
    lease = via_lossy.claim("w", visibility=30)
    lossy.lose_next(statement)
    # The retry finds the row already gone / freed / parked / extended by the lost
    # attempt: that is our own success, not a lost lease.
    if settle == "ack":
        via_lossy.ack(lease)
    elif settle == "nack-now":
        via_lossy.nack(lease, 0)
    elif settle == "nack-park":
        via_lossy.nack(lease, 60)
    else:
        via_lossy.extend(lease, 60)
    assert lossy.lost == [statement]
    assert via_lossy.stats() == after


def test_a_publish_that_never_got_an_answer_is_maybe_published(
    lossy: LossyProxy, cluster: LocalCluster, make_transport: Callable[..., Any]
) -> None:
    """Every answer lost until the budget runs out: UnavailableError says the publish may
    have been applied; it was, once, and the caller's retry with the same key adds none."""
    transport = make_transport([lossy.url], retry_timeout=1)
    transport.stats()  # sync the clock while answers still arrive
    lossy.lose_next("publish", times=1000)
    with pytest.raises(UnavailableError) as unavailable:
        transport.publish("g", 1, key="order-7")
    assert unavailable.value.ambiguous is True
    attempts = len(lossy.lost)
    assert attempts >= 2  # every attempt reached rqlite ...
    observer = make_transport(cluster.urls)
    assert observer.stats().messages == 1  # ... and the key kept it to one message
    lossy.heal()
    transport.publish("g", 1, key="order-7")
    assert observer.stats().messages == 1
    lossy.lose_next("stats", times=1000)
    with pytest.raises(UnavailableError) as read_failed:
        transport.stats()
    assert read_failed.value.ambiguous is False  # a read applies nothing
