"""Lease deadlines across workers whose clocks disagree.

A lease is live while ``lock_expiry >= now``, and every worker supplies ``now``. With
:class:`~raftflow.transports.db.clock.ClusterClock` (the default) ``now`` is the rqlite
leader's clock tracked locally, so a worker whose own clock is 5 s off behaves exactly like
the others: it neither steals live leases nor writes deadlines that end too early or too late.
The negative control runs workers on their own skewed wall clock
(:class:`~raftflow.transports.db.clock.LocalClock`) and shows the theft this prevents -- proof
that the tests would catch it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from raftflow.transports.db.clock import ClusterClock, LocalClock
from raftflow.transports.queue import QUERIES

from raftflow.errors import LeaseLostError

SKEW = 5.0
VISIBILITY = 3.0


def skewed_cluster_clock(offset: float) -> ClusterClock:
    """A ClusterClock whose local clock runs ``offset`` seconds off real time."""
    return ClusterClock(QUERIES("clock"), local_time=lambda: time.time() + offset)


@pytest.mark.slow
def test_workers_with_skewed_local_clocks_keep_lease_deadlines_exact(
    make_transport: Callable[..., Any],
) -> None:
    a = make_transport()
    ahead = make_transport(clock=skewed_cluster_clock(+SKEW))
    behind = make_transport(clock=skewed_cluster_clock(-SKEW))
    a.publish("held-by-a", 1, priority=4)
    a.publish("orphan-ahead", 1)
    a.publish("orphan-behind", 1)

    held = a.claim("a", visibility=VISIBILITY, min_priority=4)
    assert held is not None and held.group_id == "held-by-a"
    claimed_at: dict[str, float] = {}
    for worker, group in ((ahead, "orphan-ahead"), (behind, "orphan-behind")):
        lease = worker.claim("skewed", visibility=VISIBILITY)
        claimed_at[group] = time.monotonic()
        assert lease is not None and lease.group_id == group
        # The deadline is on the shared clock, not 5 s off (half of that: the machine's).
        assert abs(lease.expires_at - (time.time() + VISIBILITY)) < 2.5, lease
        # ... and the skewed worker now "dies": it never settles this lease.

    recovered_after: dict[str, float] = {}
    deadline = time.monotonic() + 3 * VISIBILITY
    while len(recovered_after) < 2 and time.monotonic() < deadline:
        # Throughout, neither skewed worker may take A's live lease (the only group at
        # priority 4), which A keeps at most 3 s from lapsing -- the worker ahead would
        # take it if it used its own clock.
        held = a.extend(held, VISIBILITY)
        assert ahead.claim("skewed", visibility=VISIBILITY, min_priority=4) is None
        assert behind.claim("skewed", visibility=VISIBILITY, min_priority=4) is None
        for lease in a.claim_many("a", visibility=30, limit=2):
            recovered_after[lease.group_id] = time.monotonic() - claimed_at[lease.group_id]
            assert lease.attempts == 2
            a.ack(lease)
        time.sleep(0.05)
    # Lapsed after the visibility: not at once (a deadline written 5 s early), not 5 s
    # late (half of that: the machine's), not never.
    assert set(recovered_after) == {"orphan-ahead", "orphan-behind"}, recovered_after
    for group, after in recovered_after.items():
        assert VISIBILITY - 0.5 <= after < VISIBILITY + 2.5, (group, after)
    a.ack(held)  # A's lease held all along
    assert a.stats().messages == 0


def test_negative_control_local_skewed_clocks_break_leases(
    make_transport: Callable[..., Any],
) -> None:
    a = make_transport()
    a.publish("g", 1)
    # A worker whose wall clock runs 5 s ahead sees A's 3 s lease as lapsed: it steals it.
    held = a.claim("a", visibility=VISIBILITY)
    assert held is not None and held.group_id == "g"
    thief = make_transport(clock=LocalClock(skew=SKEW))
    stolen = thief.claim("thief", visibility=VISIBILITY)
    assert stolen is not None and stolen.seq == held.seq
    with pytest.raises(LeaseLostError):
        a.ack(held)
    # A worker 5 s behind writes a deadline already past: its lease is taken at once.
    a.publish("h", 1)
    late = make_transport(clock=LocalClock(skew=-SKEW))
    short = late.claim("late", visibility=VISIBILITY)
    assert short is not None and short.group_id == "h"
    taken = a.claim("a", visibility=VISIBILITY)
    assert taken is not None and taken.seq == short.seq
