"""The transport's delivery semantics on a real 3-node rqlite cluster.

Every test body runs three times (``transport`` / ``make_transport`` are parametrized over
the sync transport on httpx, on requests, and the async twin): round-robin order, the
priority floor, parking and lease lapses, idempotent publishes, lease ownership, input
validation, error mapping, and the claim's query plan and cost.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from raftflow.transports import SqlTransport
from raftflow.transports.contract import Lease, QueueStats
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.queue import QUERIES
from raftflow.transports.rqlite.local import LocalCluster
from raftflow.transports.rqlite.protocol import encode

from raftflow.errors import (
    InvalidArgumentError,
    LeaseError,
    LeaseLostError,
    PayloadTooLargeError,
    StatementError,
)
from tests.support import wait_until

ZERO = QueueStats(messages=0, leased=0, parked=0, groups=0)


# --- helpers -----------------------------------------------------------------------------


def rows(cluster: LocalCluster, sql: str, params: Any = ()) -> list[list[Any]]:
    """A strong read straight over HTTP (not through the transport under test)."""
    statement = [sql, params] if isinstance(params, dict) else [sql, *params]
    response = httpx.post(
        f"{cluster.url}/db/query", params={"level": "strong"}, json=[statement], timeout=10
    )
    response.raise_for_status()
    result = response.json()["results"][0]
    assert "error" not in result, result
    return list(result.get("values") or [])


def execute(cluster: LocalCluster, statements: list[list[Any]]) -> None:
    response = httpx.post(f"{cluster.url}/db/execute", json=statements, timeout=30)
    response.raise_for_status()
    body = response.json()
    assert "error" not in body, body
    for result in body["results"]:
        assert "error" not in result, result


def snapshot(cluster: LocalCluster) -> dict[str, list[list[Any]]]:
    """Every row of the queue's tables: "writes nothing" means this does not change."""
    return {
        "messages": rows(cluster, "SELECT * FROM messages ORDER BY seq"),
        "groups": rows(cluster, "SELECT * FROM groups ORDER BY group_id"),
        "message_keys": rows(cluster, "SELECT * FROM message_keys ORDER BY key"),
    }


def drain(transport: Any, worker: str = "w") -> list[tuple[str, Any]]:
    """Claim and ack until nothing is claimable; the (group, event) pairs in order."""
    seen = []
    while (lease := transport.claim(worker, visibility=30)) is not None:
        seen.append((lease.group_id, lease.event))
        transport.ack(lease)
    return seen


def claim_within(transport: Any, timeout: float, worker: str = "w", **kwargs: Any) -> Lease:
    return wait_until(lambda: transport.claim(worker, **kwargs), timeout=timeout, interval=0.05)


# --- round-robin -------------------------------------------------------------------------


def test_groups_are_served_round_robin_not_fifo(transport: Any) -> None:
    # Published group by group: FIFO over seq would give a a a b b b c c c.
    for group in ("a", "b", "c"):
        for i in range(3):
            transport.publish(group, i)
    order = [group for group, _ in drain(transport)]
    assert order == ["a", "b", "c"] * 3


def test_never_claimed_groups_first_in_order_of_their_first_publish(transport: Any) -> None:
    transport.publish("zeta", 0)
    transport.publish("alpha", 0)
    transport.publish("zeta", 1)
    transport.publish("mid", 0)
    first = transport.claim("w", visibility=30)
    assert (first.group_id, first.event) == ("zeta", 0)
    transport.ack(first)
    # A group published only now, while zeta has been claimed: still before zeta, and
    # after the never-claimed groups published before it.
    transport.publish("late", 0)
    assert drain(transport) == [("alpha", 0), ("mid", 0), ("late", 0), ("zeta", 1)]


def test_a_retried_group_goes_to_the_back_of_the_round(transport: Any) -> None:
    transport.publish("a", 0)
    transport.publish("b", 0)
    transport.publish("c", 0)
    a = transport.claim("w", visibility=30)
    assert a.group_id == "a"
    transport.nack(a)  # free again, but a was just claimed: b and c first
    b = transport.claim("w", visibility=30)
    c = transport.claim("w", visibility=30)
    assert (b.group_id, c.group_id) == ("b", "c")
    again = transport.claim("w", visibility=30)
    assert (again.group_id, again.seq) == ("a", a.seq)


# --- priority floor ----------------------------------------------------------------------


def test_priority_floor_only_leases_groups_at_or_above_it(transport: Any) -> None:
    for priority in range(5):
        transport.publish(f"p{priority}", "x", priority)
    leases = transport.claim_many("w", visibility=30, limit=10, min_priority=2)
    assert sorted(lease.group_id for lease in leases) == ["p2", "p3", "p4"]
    # Those are busy now: the floor still never falls back to the groups below it.
    assert transport.claim("w", visibility=30, min_priority=2) is None
    assert transport.claimable(min_priority=2) is False
    assert transport.claimable(min_priority=0) is True
    for lease in leases:
        transport.ack(lease)
    assert transport.claim("w", visibility=30, min_priority=1).group_id == "p1"
    assert transport.claim("w", visibility=30, min_priority=1) is None
    assert transport.claim("w", visibility=30).group_id == "p0"


def test_group_priority_is_set_by_its_first_publish(transport: Any) -> None:
    transport.publish("low", 1, priority=0)
    transport.publish("low", 2, priority=4)  # does not raise the group
    transport.publish("high", 1, priority=4)
    transport.publish("high", 2, priority=0)  # does not lower it either
    assert transport.claim("w", visibility=30, min_priority=1).event == 1
    lease = transport.claim("w", visibility=30, min_priority=1)
    assert lease is None  # high is busy, low stays at priority 0
    first = transport.claim_many("w2", visibility=30, limit=5, min_priority=0)
    assert [(le.group_id, le.event) for le in first] == [("low", 1)]


def test_high_priority_group_keeps_its_floor_until_drained(transport: Any) -> None:
    transport.publish("high", 1, priority=3)
    transport.publish("high", 2, priority=0)
    transport.publish("low", 1, priority=0)
    seen = []
    while (lease := transport.claim("w", visibility=30, min_priority=3)) is not None:
        seen.append(lease.event)
        transport.ack(lease)
    assert seen == [1, 2]
    assert transport.stats().groups == 1  # only "low" is left


# --- claim_many --------------------------------------------------------------------------


def test_claim_many_takes_the_head_of_distinct_groups_only(transport: Any) -> None:
    for i in range(3):
        transport.publish("a", i)
        transport.publish("b", i)
    transport.publish("c", 0)
    leases = transport.claim_many("w", visibility=30, limit=10)
    assert sorted((le.group_id, le.event) for le in leases) == [("a", 0), ("b", 0), ("c", 0)]
    assert len({le.token for le in leases}) == 1  # one statement, one token
    assert transport.claim_many("w", visibility=30, limit=10) == []
    stats = transport.stats()
    assert (stats.messages, stats.leased, stats.groups) == (7, 3, 3)
    for lease in leases:
        transport.ack(lease)
    again = transport.claim_many("w", visibility=30, limit=2)
    assert len(again) == 2 and len({le.group_id for le in again}) == 2
    assert all(le.event == 1 for le in again)


# --- nack --------------------------------------------------------------------------------


def test_nack_zero_frees_the_same_message_for_immediate_retry(transport: Any) -> None:
    transport.publish("g", "first")
    transport.publish("g", "second")
    lease = transport.claim("w", visibility=30)
    assert lease.attempts == 1
    transport.nack(lease, 0)
    assert transport.stats() == QueueStats(messages=2, leased=0, parked=0, groups=1)
    retry = transport.claim("w2", visibility=30)
    assert (retry.seq, retry.event, retry.attempts) == (lease.seq, "first", 2)
    assert retry.token != lease.token


def test_nack_with_delay_parks_the_group_until_the_delay_passes(transport: Any) -> None:
    transport.publish("g", "first")
    transport.publish("g", "second")
    lease = transport.claim("w", visibility=30)
    parked_at = time.monotonic()
    transport.nack(lease, 1.0)
    assert transport.stats() == QueueStats(messages=2, leased=0, parked=1, groups=1)
    time.sleep(max(0.0, parked_at + 0.5 - time.monotonic()))
    # Half-way: neither the parked message nor the one behind it is deliverable.
    assert transport.claimable() is False
    assert transport.claim("w", visibility=30) is None
    retry = claim_within(transport, timeout=30.0, visibility=30)
    assert time.monotonic() - parked_at >= 0.9  # not before its delay (then: claimed again)
    assert (retry.seq, retry.event, retry.attempts) == (lease.seq, "first", 2)


# --- leases: lapse, extend, ack ----------------------------------------------------------


def test_a_lapsed_lease_is_redelivered_and_its_holder_can_no_longer_settle(
    transport: Any,
) -> None:
    for group in ("a", "b", "c"):
        transport.publish(group, group)
    stale = transport.claim_many("slow", visibility=1.0, limit=3)
    claimed_at = time.monotonic()
    assert len(stale) == 3
    assert transport.claim("fast", visibility=30) is None  # still leased
    fresh: list[Lease] = []
    deadline = claimed_at + 30.0
    while len(fresh) < 3 and time.monotonic() < deadline:
        fresh += transport.claim_many("fast", visibility=30, limit=3)
        time.sleep(0.05)
    assert time.monotonic() - claimed_at >= 0.9  # not before the lease lapsed
    assert sorted((le.seq, le.attempts) for le in fresh) == sorted((le.seq, 2) for le in stale)
    before = transport.stats()
    assert before == QueueStats(messages=3, leased=3, parked=0, groups=3)
    # The first worker wakes up: every way of settling is refused and changes nothing.
    by_group = {le.group_id: le for le in stale}
    with pytest.raises(LeaseLostError):
        transport.ack(by_group["a"])
    with pytest.raises(LeaseLostError):
        transport.nack(by_group["b"], 0)
    with pytest.raises(LeaseLostError):
        transport.extend(by_group["c"], 30)
    assert transport.stats() == before
    assert transport.claim("other", visibility=30) is None  # the fresh leases still hold
    for lease in fresh:
        transport.ack(lease)
    assert transport.stats() == ZERO


def test_a_lapsed_lease_nobody_took_can_still_be_acked(transport: Any) -> None:
    transport.publish("g", 1)
    lease = transport.claim("w", visibility=0.2)
    time.sleep(0.4)
    transport.ack(lease)  # late, but nobody else holds it: the work is not lost
    assert transport.stats() == ZERO


def test_extend_keeps_a_lease_alive_past_its_original_visibility(transport: Any) -> None:
    transport.publish("g", 1)
    lease = transport.claim("w", visibility=1.0)
    claimed_at = time.monotonic()
    time.sleep(0.5)
    extended = transport.extend(lease, 3.0)
    assert extended.seq == lease.seq and extended.token == lease.token
    assert extended.expires_at >= lease.expires_at + 0.4
    time.sleep(max(0.0, claimed_at + 1.6 - time.monotonic()))
    assert transport.claim("thief", visibility=30) is None
    transport.ack(extended)
    assert transport.stats() == ZERO


def test_ack_drops_the_group_row_with_its_last_message_only(transport: Any) -> None:
    transport.publish("g", 1)
    transport.publish("g", 2)
    transport.publish("other", 1)
    first = transport.claim("w", visibility=30)
    assert first.group_id == "g"
    transport.ack(first)
    assert transport.stats() == QueueStats(messages=2, leased=0, parked=0, groups=2)
    assert drain(transport) == [("other", 1), ("g", 2)]
    assert transport.stats() == ZERO


def test_a_settled_lease_cannot_be_settled_again(transport: Any) -> None:
    transport.publish("g", 1)
    transport.publish("g", 2)
    lease = transport.claim("w", visibility=30)
    transport.nack(lease)
    for settle in (
        lambda: transport.ack(lease),
        lambda: transport.nack(lease, 1),
        lambda: transport.extend(lease, 5),
    ):
        with pytest.raises(LeaseError, match="already settled"):
            settle()
    assert transport.stats() == QueueStats(messages=2, leased=0, parked=0, groups=1)


# --- idempotent publish ------------------------------------------------------------------


def test_publish_with_the_same_key_adds_one_message(
    transport: Any, make_transport: Callable[..., Any]
) -> None:
    transport.publish("g", {"n": 1}, key="order-42:created")
    transport.publish("g", {"n": 1}, key="order-42:created")
    # Another transport (another worker) retrying the same publish: still one.
    make_transport().publish("g", {"n": 1}, key="order-42:created")
    transport.publish("g", {"n": 2}, key="order-42:paid")
    assert transport.stats().messages == 2
    # The key stays known after its message was consumed (within the dedup window).
    assert drain(transport) == [("g", {"n": 1}), ("g", {"n": 2})]
    transport.publish("g", {"n": 1}, key="order-42:created")
    assert transport.stats() == ZERO


def test_publish_without_key_is_never_deduplicated(transport: Any) -> None:
    transport.publish("g", 1)
    transport.publish("g", 1)
    assert transport.stats().messages == 2


# --- lease ownership ---------------------------------------------------------------------


def test_foreign_and_hand_made_leases_are_refused(
    transport: Any, make_transport: Callable[..., Any], cluster: LocalCluster
) -> None:
    transport.publish("g", 1)
    transport.publish("g", 2)
    lease = transport.claim("w", visibility=30)
    other = make_transport()
    before = snapshot(cluster)
    forged = [
        # the genuine lease, presented to a transport that did not issue it
        (other, lease),
        # a Lease built by hand with the genuine seq and token
        (transport, Lease(lease.seq, lease.group_id, lease.event, token=lease.token)),
        # a copy of the genuine lease with another token
        (transport, dataclasses.replace(lease, token="w:" + "0" * 32)),
        # a copy pointing at another message of the group
        (transport, dataclasses.replace(lease, seq=lease.seq + 1)),
    ]
    for holder, fake in forged:
        for method, args in (("ack", ()), ("nack", (0,)), ("nack", (5,)), ("extend", (60,))):
            with pytest.raises(LeaseError) as caught:
                getattr(holder, method)(fake, *args)
            assert type(caught.value) is LeaseError, (method, caught.value)
    assert snapshot(cluster) == before
    transport.ack(lease)  # the real one is untouched
    assert transport.stats().messages == 1


# --- bad input ---------------------------------------------------------------------------


def _circular() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


BAD_IDS = ["", 5, None, b"g", "x" * 257, "a\x00b", "\ud800", "ok\udfff"]
BAD_EVENTS = [
    object(),
    float("nan"),
    float("inf"),
    -math.inf,
    {"x": [1, float("nan")]},
    "\ud800",
    {"\udc00": 1},
    {1: object()},
    _circular(),
]
BAD_PRIORITIES = [5, -1, True, False, 1.0, "1", None]
BAD_VISIBILITIES = [0, -1, 0.0, float("nan"), float("inf"), True, "1", None, 366 * 86400 + 1]
BAD_DELAYS = [-1, -0.001, float("nan"), float("inf"), True, "0", None]
BAD_LIMITS = [0, -1, 257, True, 1.5, "2", None]
NOT_LEASES = [None, "lease", 42, {"seq": 1, "token": "w:x"}]


def bad_calls(transport: Any, lease: Lease) -> list[tuple[str, Callable[[], Any]]]:
    calls: list[tuple[str, Callable[[], Any]]] = []

    def add(label: str, call: Callable[[], Any]) -> None:
        calls.append((label, call))

    for v in BAD_IDS:
        add(f"publish(group_id={v!r})", lambda v=v: transport.publish(v, 1))
        if v is not None:  # None is the default: a generated key
            add(f"publish(key={v!r})", lambda v=v: transport.publish("g", 1, key=v))
        add(f"claim(worker_id={v!r})", lambda v=v: transport.claim(v, 30))
        add(f"claim_many(worker_id={v!r})", lambda v=v: transport.claim_many(v, 30, 2))
    for v in BAD_EVENTS:
        add(f"publish(event={v!r:.40})", lambda v=v: transport.publish("g", v))
    for v in BAD_PRIORITIES:
        add(f"publish(priority={v!r})", lambda v=v: transport.publish("g", 1, v))
        add(f"claim(min_priority={v!r})", lambda v=v: transport.claim("w", 30, v))
        add(f"claim_many(min_priority={v!r})", lambda v=v: transport.claim_many("w", 30, 2, v))
        add(f"claimable(min_priority={v!r})", lambda v=v: transport.claimable(v))
    for v in BAD_VISIBILITIES:
        add(f"claim(visibility={v!r})", lambda v=v: transport.claim("w", v))
        add(f"claim_many(visibility={v!r})", lambda v=v: transport.claim_many("w", v, 2))
        add(f"extend(visibility={v!r})", lambda v=v: transport.extend(lease, v))
    for v in BAD_LIMITS:
        add(f"claim_many(limit={v!r})", lambda v=v: transport.claim_many("w", 30, v))
    for v in BAD_DELAYS:
        add(f"nack(delay={v!r})", lambda v=v: transport.nack(lease, v))
    for v in NOT_LEASES:
        add(f"ack({v!r})", lambda v=v: transport.ack(v))
        add(f"nack({v!r})", lambda v=v: transport.nack(v))
        add(f"extend({v!r})", lambda v=v: transport.extend(v, 30))
    return calls


def test_bad_input_at_every_public_call_raises_and_writes_nothing(
    transport: Any, cluster: LocalCluster
) -> None:
    transport.publish("g", "held")
    transport.publish("free", "waiting")
    lease = transport.claim("w", visibility=30)
    assert lease.group_id == "g"
    before = snapshot(cluster)
    not_refused = []
    for label, call in bad_calls(transport, lease):
        try:
            call()
        except InvalidArgumentError:
            continue
        except Exception as exc:
            not_refused.append(f"{label} raised {type(exc).__name__}: {exc}")
        else:
            not_refused.append(f"{label} was accepted")
    assert not_refused == []
    assert snapshot(cluster) == before
    # The lease survived every bad call on it.
    transport.ack(lease)
    assert transport.stats() == QueueStats(messages=1, leased=0, parked=0, groups=1)


def test_payload_over_the_limit_is_refused(make_transport: Callable[..., Any]) -> None:
    transport = make_transport(max_event_bytes=64)
    transport.publish("g", "x" * 60)  # 62 bytes as JSON: fits
    with pytest.raises(PayloadTooLargeError, match="64"):
        transport.publish("g", "x" * 63)
    assert transport.stats().messages == 1


def test_values_at_the_limits_are_accepted_and_round_trip(transport: Any) -> None:
    long_id = "x" * 256
    event = {"text": "Grüße, 日本, 🚀", "nested": [[[{"n": -1.5e300}]]], "none": None}
    transport.publish(long_id, event, priority=4, key="k" * 256)
    transport.publish("Grüße-日本-🚀", "ok", priority=0)
    lease = transport.claim("w" * 256, visibility=366 * 86400, min_priority=4)
    assert (lease.group_id, lease.event) == (long_id, event)
    transport.ack(lease)
    leases = transport.claim_many("w", visibility=30, limit=256)
    assert [(le.group_id, le.event) for le in leases] == [("Grüße-日本-🚀", "ok")]
    transport.nack(leases[0], 366 * 86400)
    assert transport.stats().parked == 1


# --- errors from rqlite ------------------------------------------------------------------


def test_a_failing_statement_raises_statement_error_naming_it(
    transport: Any, cluster: LocalCluster
) -> None:
    transport.publish("g", 1)
    # DROP TABLE takes the table's indexes and triggers with it -- later migrations' too
    # (migration 9's `group_gated`, until migration 10, without which limited executions
    # were never gated, and the shared cluster's later tests saw it): put back exactly
    # what was there.
    schema_of_groups = (
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'groups' AND sql IS NOT NULL "
        "ORDER BY type <> 'table', name"
    )
    saved = rows(cluster, schema_of_groups)
    execute(cluster, [["DROP TABLE groups"]])
    try:
        with pytest.raises(StatementError) as publish_error:
            transport.publish("g", 2)
        with pytest.raises(StatementError) as claim_error:
            transport.claim("w", visibility=30)
    finally:
        execute(cluster, [[sql] for (sql,) in saved])
    assert rows(cluster, schema_of_groups) == saved
    assert any("groups_ready" in sql for (sql,) in saved)  # the indexes too
    assert publish_error.value.statement == "queue.publish"
    assert "queue.publish" in str(publish_error.value)
    assert "groups" in publish_error.value.error
    assert claim_error.value.statement == "queue.claim"
    assert "no such table" in str(claim_error.value)
    # Neither wrote anything: one message, never leased.
    assert rows(cluster, "SELECT event, locked_by, attempts FROM messages") == [["1", None, 0]]


# --- the claim's plan and cost -----------------------------------------------------------

_ANY_SCAN_OF_TABLE = re.compile(r"^SCAN (messages|groups|m|g)\b")


def claim_params() -> dict[str, Any]:
    now = time.time()
    return {"token": "w:plan", "now": now, "expiry": now + 30, "limit": 1, "min_priority": 0}


def _plan_problems(details: list[str]) -> list[str]:
    problems = [d for d in details if _ANY_SCAN_OF_TABLE.match(d)]
    if not any("groups_ready" in d for d in details):
        problems.append("groups_ready is not used")
    if not any("messages_by_group" in d for d in details):
        problems.append("messages_by_group is not used")
    return problems


def _claim_pick_plan(transport: Any) -> list[str]:
    """rqlite's plan of the statement that picks the claim's rows (its ``seq IN (...)``)."""
    found = re.search(r"WHERE seq IN \((.*)\)\s*$", QUERIES.queries["claim"], re.S)
    assert found, "the claim is no longer UPDATE ... WHERE seq IN (SELECT ...)"
    plan = Statement("plan", "EXPLAIN QUERY PLAN " + found.group(1), claim_params())
    response = transport.connection.send(Request((plan,), level="weak")).raise_for_errors()
    return [row["detail"] for row in response[0].dicts()]


@pytest.mark.parametrize("transport_kind", ["raftflow"])
def test_claim_plan_walks_the_indexes_on_rqlite(transport: Any) -> None:
    """rqlite refuses ``EXPLAIN QUERY PLAN UPDATE`` on /db/query ("attempt to change
    database via query operation") and runs it as a write elsewhere, so the plan of the
    statement that picks the rows -- the claim's ``seq IN (SELECT ...)`` -- is read from
    rqlite's own SQLite, and the whole UPDATE's plan from the SQLite twin below."""
    details = _claim_pick_plan(transport)
    assert _plan_problems(details) == [], details
    # The read-back of the claim finds its rows by token, not by scanning.
    readback = QUERIES.explain("claimed", {"token": "w:plan"})
    response = transport.connection.send(Request((readback,), level="weak")).raise_for_errors()
    details = [row["detail"] for row in response[0].dicts()]
    assert any("messages_by_token" in d for d in details), details
    assert not any(_ANY_SCAN_OF_TABLE.match(d) for d in details), details


def test_whole_claim_request_plan_uses_indexes_on_sqlite() -> None:
    with SqlTransport.from_url("sqlite://") as sqlite:
        params = claim_params()
        for name, expect in (
            ("claim", ("groups_ready", "messages_by_group", "INTEGER PRIMARY KEY")),
            ("touch_claimed_groups", ("messages_by_token",)),
            ("claimed", ("messages_by_token",)),
        ):
            response = sqlite.connection.send(Request((QUERIES.explain(name, params),)))
            details = [row["detail"] for row in response.raise_for_errors()[0].dicts()]
            assert not any(_ANY_SCAN_OF_TABLE.match(d) for d in details), (name, details)
            for index in expect:
                assert any(index in d for d in details), (name, index, details)


def _bulk_publish(cluster: LocalCluster, groups: int, per_group: int, prefix: str) -> None:
    sql = "INSERT INTO messages (group_id, event, priority, published_at) VALUES "
    values = [(f"{prefix}{g}", f'{{"i":{i}}}') for i in range(per_group) for g in range(groups)]
    for start in range(0, len(values), 1000):
        chunk = values[start : start + 1000]
        params = [p for pair in chunk for p in pair]
        execute(cluster, [[sql + ",".join(["(?, ?, 0, 0)"] * len(chunk)), *params]])


def _median_claim_latency(transport: Any, claims: int) -> float:
    """Median seconds of ``transport.claim`` end to end (HTTP, Raft, SQL)."""
    latencies = []
    for _ in range(claims):
        started = time.perf_counter()
        lease = transport.claim("w", visibility=30)
        latencies.append(time.perf_counter() - started)
        assert lease is not None
        transport.nack(lease)  # same queue size for the next claim
    return statistics.median(latencies)


def _median_claim_statement_time(transport: Any, cluster: LocalCluster, claims: int) -> float:
    """Median seconds rqlite's SQLite spent in the claim UPDATE itself (``?timings``).

    End to end, HTTP and Raft dominate (several ms here) and hide the SQL's cost: the
    spec's own claim query goes from 0.3 ms to 3.7 ms at 5k messages, which moves the
    end-to-end median by less than 2x. The statement's own time shows it.
    """
    times = []
    with httpx.Client(base_url=cluster.url, timeout=10) as client:
        for i in range(claims):
            now = time.time()
            request = Request(transport.flows.claim_statements(f"probe:{i}", now, now + 30, 1, 0))
            path, params, body = encode(request)
            response = client.post(
                path,
                params={**params, "timings": ""},
                content=body,
                headers={"Content-Type": "application/json"},
            )
            results = response.json()["results"]
            assert results[0].get("rows_affected") == 1, results
            times.append(results[0]["time"])
            release = "UPDATE messages SET locked_by = NULL, lock_expiry = 0 WHERE locked_by = ?"
            client.post("/db/execute", json=[[release, f"probe:{i}"]]).raise_for_status()
    return statistics.median(times)


@pytest.mark.slow
@pytest.mark.parametrize("transport_kind", ["raftflow"])
def test_a_large_queue_is_claimed_through_its_indexes(
    transport: Any, cluster: LocalCluster
) -> None:
    _bulk_publish(cluster, groups=10, per_group=1, prefix="small-")
    _median_claim_latency(transport, 10)  # warm up connections and the clock
    small = _median_claim_latency(transport, 40)
    small_sql = _median_claim_statement_time(transport, cluster, 30)
    _bulk_publish(cluster, groups=500, per_group=10, prefix="big-")
    assert transport.stats() == QueueStats(messages=5010, leased=0, parked=0, groups=510)
    large = _median_claim_latency(transport, 40)
    large_sql = _median_claim_statement_time(transport, cluster, 30)
    # Measured, reported: a machine's noise is never asserted. What keeps the claim's cost
    # flat is its plan, asserted on the large queue: it walks the indexes, scans nothing.
    print(
        f"median claim {small * 1e3:.2f} ms -> {large * 1e3:.2f} ms; its statement "
        f"{small_sql * 1e6:.0f} us -> {large_sql * 1e6:.0f} us (10 -> 510 groups)"
    )
    details = _claim_pick_plan(transport)
    assert _plan_problems(details) == [], details
