"""Property-based tests over the public API with hostile data, on the shared 3-node
cluster: whatever hypothesis throws at publish/claim/nack and engine.start, either it is
refused with InvalidArgumentError and nothing is written, or it comes back out exactly
as it went in. Nothing corrupts the queue or the store."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raftflow.stores.records import Status
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.rqlite import RqliteTransport
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, InputValidationError
from raftflow.errors import InvalidArgumentError, PayloadTooLargeError
from tests.support import clear_tables

SQLISH = st.sampled_from(
    [
        "'; DROP TABLE messages; --",
        "x' OR '1'='1",
        "__parked__",
        'g"; DELETE FROM groups; --',
        ":token",
        "?",
        "%s",
        "{{fragment.ready_groups}}",
    ]
)
# Any code point, including lone surrogates (which must be refused) and NUL.
ANY_CHAR = st.characters(codec=None, categories=None)
GROUP_IDS = st.one_of(
    SQLISH,
    st.text(ANY_CHAR, min_size=0, max_size=300),
    st.integers(),
    st.none(),
    st.binary(max_size=10),
)
JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(ANY_CHAR, max_size=50),
    SQLISH,
)
EVENTS = st.recursive(
    JSON_LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(ANY_CHAR, max_size=10), children, max_size=5),
    ),
    max_leaves=20,
)
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.booleans(),
    st.none(),
    st.text(max_size=3),
)

PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def queue(rqlite_cluster: LocalCluster) -> Iterator[RqliteTransport]:
    clear_tables(rqlite_cluster.url)
    transport = RqliteTransport.from_url(rqlite_cluster.urls)
    yield transport
    transport.close()


def _valid_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_valid(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, str):
        return _valid_text(value)
    if isinstance(value, list):
        return all(_json_valid(v) for v in value)
    if isinstance(value, dict):
        return all(_valid_text(k) and _json_valid(v) for k, v in value.items())
    return True


def _drain(queue: RqliteTransport) -> None:
    while (lease := queue.claim("fuzz", visibility=30)) is not None:
        queue.ack(lease)


@PROPERTY_SETTINGS
@given(group_id=GROUP_IDS, event=EVENTS, priority=st.one_of(st.integers(-3, 7), st.booleans()))
def test_publish_round_trips_or_refuses(
    queue: RqliteTransport, group_id: Any, event: Any, priority: Any
) -> None:
    valid = (
        isinstance(group_id, str)
        and 0 < len(group_id) <= 256
        and "\x00" not in group_id
        and _valid_text(group_id)
        and _json_valid(event)
        and isinstance(priority, int)
        and not isinstance(priority, bool)
        and 0 <= priority <= 4
    )
    if not valid:
        with pytest.raises(InvalidArgumentError):
            queue.publish(group_id, event, priority)
        assert queue.stats().messages == 0
        return
    queue.publish(group_id, event, priority)
    lease = queue.claim("fuzz", visibility=30)
    assert lease is not None
    assert lease.group_id == group_id
    assert lease.event == event
    queue.ack(lease)
    stats = queue.stats()
    assert (stats.messages, stats.groups) == (0, 0)


@PROPERTY_SETTINGS
@given(visibility=NUMBERS, delay=NUMBERS)
def test_lease_times_are_validated(queue: RqliteTransport, visibility: Any, delay: Any) -> None:
    _drain(queue)
    queue.publish("timing", "x")

    def ok(value: Any, *, zero: bool) -> bool:
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and (value > 0 or (zero and value == 0))
            and value <= 366 * 86400
        )

    if not ok(visibility, zero=False):
        with pytest.raises(InvalidArgumentError):
            queue.claim("fuzz", visibility)
        lease = queue.claim("fuzz", 30)
    else:
        lease = queue.claim("fuzz", visibility)
    assert lease is not None and lease.event == "x"
    if ok(delay, zero=True):
        queue.nack(lease, 0 if delay > 0 else delay)  # never park in this test
        again = queue.claim("fuzz", 30)
        assert again is not None
        queue.ack(again)
    else:
        with pytest.raises(InvalidArgumentError):
            queue.nack(lease, delay)
        queue.ack(lease)  # the refused nack left the lease alone
    assert queue.stats().messages == 0


def test_payload_size_limit_is_exact(queue: RqliteTransport) -> None:
    overhead = len('""')
    fits = "a" * (MAX_PAYLOAD_BYTES - overhead)
    queue.publish("big", fits)
    lease = queue.claim("fuzz", 30)
    assert lease is not None and lease.event == fits
    queue.ack(lease)
    with pytest.raises(PayloadTooLargeError, match=f"over the limit of {MAX_PAYLOAD_BYTES}"):
        queue.publish("big", fits + "é")  # one more character, two more bytes
    assert queue.stats().messages == 0


@pytest.fixture(scope="module")
def engine(rqlite_cluster: LocalCluster) -> Iterator[Engine]:
    engine = Engine.from_url(",".join(rqlite_cluster.urls).replace(",http://", ","))

    @engine.workflow(name="fuzz_ints")
    def total(values: list[int]) -> int:
        return sum(values)

    yield engine
    engine.close()


@PROPERTY_SETTINGS
@given(value=EVENTS)
def test_start_validates_input_against_the_annotation(engine: Engine, value: Any) -> None:
    total = "fuzz_ints"
    before = len(engine.list(limit=10_000))
    is_int_list = isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    )
    if is_int_list:
        handle = engine.start(total, value)
        assert handle.info().input == value and handle.status() is Status.PENDING
    else:
        try:
            engine.start(total, value)
        except (InputValidationError, InvalidArgumentError):
            assert len(engine.list(limit=10_000)) == before
        else:  # pydantic's lax mode accepts e.g. ["1", 2.0, True] for list[int]
            assert len(engine.list(limit=10_000)) == before + 1
