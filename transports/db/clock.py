"""Whose clock lease deadlines are measured by.

A lease is live while ``lock_expiry >= now``; every worker computes ``now`` and writes it
as a parameter (never SQL's clock, which rqlite 8.26 does not replicate deterministically).
If each worker used its own wall clock, one running 5 s ahead would see live leases as
lapsed and steal them, and one running behind would write deadlines that stay live too
long. :class:`ClusterClock` instead measures every worker's time on one reference: the
rqlite leader's clock, read with a cheap ``weak`` query and then advanced with the local
monotonic clock. Workers then agree to within half a round trip plus the drift since
the last sync, whatever their own clocks say. The price is one read every ``resync``
seconds per transport, and the assumption (documented) that rqlite nodes keep their
clocks within a small fraction of the visibility timeout of each other (NTP does).

A clock's ``now()`` is a flow: it yields a request only when it needs a sync.

``now()`` is the best estimate (the midpoint of the last sync), which may run ahead of the
reference by up to half that sync's round trip -- seconds, if the worker stalled or the
network crawled during it. Decisions that must never come early (taking over another
worker's lease) use :func:`earliest` instead: a time the reference has surely reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from raftflow.transports.db.flow import Flow, Request, Statement

from raftflow.errors import ProtocolError


class Clock(Protocol):
    def now(self) -> Flow[float]:
        """The current time in epoch seconds, on the shared reference."""
        ...

    def estimate(self) -> float:
        """``now`` without I/O, for timestamps that are only shown (never for leases)."""
        ...


def uncertainty_of(clock: Clock) -> float:
    """How far ``clock``'s estimate may be off the reference, either way (0 for a local
    clock, and for a cluster clock not synced yet)."""
    value = getattr(clock, "uncertainty", 0.0)
    return float(value) if isinstance(value, (int, float)) and value < float("inf") else 0.0


def surely_after(clock: Clock, now: float, seconds: float) -> float:
    """A time at least ``seconds`` after ``now`` (``clock``'s estimate) on the reference:
    the estimate may be behind it by its uncertainty. What a start's debounce and a
    workflow's timeout are measured from, so neither ends early."""
    return now + uncertainty_of(clock) + seconds


def earliest_estimate(clock: Clock) -> float:
    """Without I/O, a time ``clock``'s reference has surely reached: its
    ``earliest_estimate()`` if it has one, else its estimate less its uncertainty."""
    method = getattr(clock, "earliest_estimate", None)
    if method is not None:
        return float(method())
    return clock.estimate() - uncertainty_of(clock)


def is_virtual(clock: Clock) -> bool:
    """Whether ``clock`` moves only when told (``engine.testing.VirtualClock``): nothing
    may wait for it in real time."""
    return getattr(clock, "virtual", False) is True


def earliest(clock: Clock) -> Flow[float]:
    """A time ``clock``'s reference has surely reached (``earliest()`` if the clock has one,
    else ``now()``): what a lease takeover compares deadlines with."""
    method = getattr(clock, "earliest", None)
    if method is None:
        return (yield from clock.now())
    value: float = yield from method()
    return value


class LocalClock:
    """This machine's wall clock (plus ``skew``, for tests); right for one-machine SQLite."""

    def __init__(self, *, skew: float = 0.0, time_source: Callable[[], float] = time.time):
        self.skew = skew
        self._time = time_source

    def now(self) -> Flow[float]:
        return self._time() + self.skew
        yield  # pragma: no cover - makes this a generator that never yields

    def estimate(self) -> float:
        return self._time() + self.skew

    def __repr__(self) -> str:
        return f"LocalClock(skew={self.skew})"


#: A clock sync this precise (half its round trip, seconds) is kept for ``resync``.
PRECISE = 0.025


class ClusterClock:
    """The rqlite leader's clock, tracked locally between syncs.

    ``local_time`` is any steadily increasing clock of this machine (``time.monotonic`` by
    default); only its differences are used, so its offset from real time does not matter
    (tests pass a skewed one, or one that jumps).
    """

    def __init__(
        self,
        query: Statement,
        *,
        resync: float = 30.0,
        local_time: Callable[[], float] | None = None,
    ) -> None:
        self._query = query  # one row, column ``now``: the leader's epoch seconds
        self._resync = resync
        self._local = local_time or time.monotonic
        self._anchor: tuple[float, float] | None = None  # (reference time, local time)
        self._uncertainty = float("inf")  # half the round trip of the sync in use
        self._synced_at = float("-inf")  # local time of the last sync attempt
        # Never backwards: a resync that finds the leader behind our extrapolation (or a
        # new leader whose clock is) holds the time until it catches up, so that a
        # deadline computed earlier never comes to look later, nor a wait end early.
        self._last = float("-inf")

    def now(self) -> Flow[float]:
        anchor = self._anchor
        local = self._local()
        # A sync whose round trip was slow (a busy leader, a worker starting on a loaded
        # machine) may be off by half of it: try again within a second, and keep the
        # better of the two while the older one is fresh.
        due = self._resync if self._uncertainty <= PRECISE else min(self._resync, 1.0)
        # Also at once when the local clock went back (an operator, an NTP step, a VM
        # resumed): the anchor no longer says how far it is from the reference.
        if anchor is None or local - self._synced_at > due or local < self._synced_at:
            before = self._local()
            response = yield Request((self._query,), transaction=False, level="weak")
            after = self._local()
            row = response.raise_for_errors()[0].first()
            if row is None or not isinstance(row["now"], (int, float)):
                raise ProtocolError("the clock query returned no time")
            self._synced_at = after
            if after < before:
                # The local clock went back during the request: its round trip is not
                # known, so neither is the reading's error (found by tests/sim, seed 1527:
                # a "negative uncertainty" put a 7 s sleep's wake time 49 s in the past).
                # Sync again: now if there is no reading to go by, else at the next call.
                self._synced_at = float("-inf")
                if anchor is None:
                    return (yield from self.now())
                return self._forward(anchor[0] + (self._local() - anchor[1]))
            uncertainty = (after - before) / 2
            # The anchor now, not the one before the request: another sync (another task
            # of this worker) may have set a better one meanwhile.
            anchor = self._anchor
            if (
                anchor is None
                or uncertainty <= self._uncertainty
                or after - anchor[1] > self._resync
            ):
                midpoint = (before + after) / 2
                self._anchor = anchor = (float(row["now"]), midpoint)
                self._uncertainty = uncertainty
            local = self._local()
        return self._forward(anchor[0] + (local - anchor[1]))

    def earliest(self) -> Flow[float]:
        """A time the leader's clock has surely reached: the estimate less the last sync's
        uncertainty (half its round trip), never held forward. Found by the simulator
        (tests/sim): a sync whose round trip a stall inflated put a worker's ``now()``
        ahead by half of it, and its claims took over live leases that early."""
        yield from self.now()
        anchor = self._anchor
        assert anchor is not None
        return anchor[0] + (self._local() - anchor[1]) - self._uncertainty

    @property
    def uncertainty(self) -> float:
        """Half the round trip of the sync in use: how far the leader's clock may be from
        what that sync says (:meth:`estimate` is never below that, never backwards)."""
        return self._uncertainty

    def earliest_estimate(self) -> float:
        """Without I/O: a time the leader's clock has surely reached -- what the last sync
        says less its uncertainty, *not* held forward as :meth:`estimate` is. Found by the
        simulator (seed 1617): a sync with a 1 s round trip put the estimate 0.5 s ahead,
        a precise one then brought the uncertainty down to 1 ms while the estimate stayed
        held 0.5 s ahead, and ``estimate - uncertainty`` said a 0.3 s sleep was over after
        0.09 s."""
        anchor = self._anchor
        if anchor is None:
            return float("-inf")
        return anchor[0] + (self._local() - anchor[1]) - self._uncertainty

    def estimate(self) -> float:
        anchor = self._anchor
        if anchor is None:
            return time.time()
        return self._forward(anchor[0] + (self._local() - anchor[1]))

    def _forward(self, value: float) -> float:
        if value < self._last:
            return self._last
        self._last = value
        return value

    def __repr__(self) -> str:
        return f"ClusterClock(resync={self._resync})"
