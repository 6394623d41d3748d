"""RqliteTransport and its async twin on a real 3-node cluster: the spec's basic contract."""

from __future__ import annotations

from typing import Any

import pytest

from raftflow.errors import InvalidArgumentError, LeaseError


def test_publish_claim_ack_round_trip(transport: Any) -> None:
    transport.publish("order-1", {"step": 1})
    lease = transport.claim("worker-a", visibility=30)
    assert lease is not None
    assert (lease.group_id, lease.event) == ("order-1", {"step": 1})
    assert lease.token.startswith("worker-a:")
    transport.ack(lease)
    assert transport.claim("worker-a", visibility=30) is None
    stats = transport.stats()
    assert (stats.messages, stats.groups) == (0, 0)


def test_fifo_within_a_group(transport: Any) -> None:
    for i in range(5):
        transport.publish("g", {"i": i})
    seen = []
    while (lease := transport.claim("w", visibility=30)) is not None:
        seen.append(lease.event["i"])
        transport.ack(lease)
    assert seen == [0, 1, 2, 3, 4]


def test_one_lease_per_group(transport: Any) -> None:
    transport.publish("g", 1)
    transport.publish("g", 2)
    first = transport.claim("w1", visibility=30)
    assert first is not None
    assert transport.claim("w2", visibility=30) is None  # the group is busy
    transport.ack(first)
    second = transport.claim("w2", visibility=30)
    assert second is not None and second.event == 2


def test_acked_lease_is_refused(transport: Any) -> None:
    transport.publish("g", 1)
    lease = transport.claim("w", visibility=30)
    transport.ack(lease)
    with pytest.raises(LeaseError, match="already settled"):
        transport.ack(lease)


@pytest.mark.parametrize(
    "group_id, event, priority",
    [("", 1, 0), (5, 1, 0), ("g", object(), 0), ("g", float("nan"), 0), ("g", 1, 5), ("g", 1, -1)],
)
def test_bad_publish_writes_nothing(
    transport: Any, group_id: Any, event: Any, priority: Any
) -> None:
    with pytest.raises(InvalidArgumentError):
        transport.publish(group_id, event, priority)
    assert transport.stats().messages == 0
