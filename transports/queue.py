"""Every queue operation as an I/O-free flow, shared by rqlite and SQLite, sync and async.

Round trips and Raft entries per call on rqlite (a request is one of each):

=============  ===========  ============================================================
operation      round trips  what the one request carries
=============  ===========  ============================================================
publish        1            idempotent INSERT (the key's row and group row via triggers)
claim          1            transaction: lease UPDATE, groups UPDATE, read-back SELECT
ack            1            DELETE by (seq, token); a holder read only if 0 rows
nack / extend  1            UPDATE by (seq, token); a holder read only if 0 rows
claimable      1            a ``weak`` read, no Raft entry (the idle worker's poll)
=============  ===========  ============================================================

plus, every 30 s per transport, one ``weak`` read of the leader's clock
(:class:`~raftflow.transports.db.clock.ClusterClock`). The spec's claim needs three round trips and
two Raft entries.

The statement builders (``*_statement``) are the only place the queue's SQL is bound; the
public operations below and a worker's batched ones (``*_leases``) both use them, and
:meth:`QueueFlows.claim` is the one claim: the store appends its reads to the same request
through ``context``.

Retries are safe: a publish carries an idempotency key, and ack/nack/extend touch a row
only while it still holds the caller's token, so a retry after an ambiguous failure
never settles someone else's lease.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from raftflow.transports.contract import PARKED, Lease, QueueStats
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock, earliest
from raftflow.transports.db.flow import Flow, Request, Response, Statement
from raftflow.transports.lanes import Lanes, check_lane, lanes_param
from raftflow.transports.payload import (
    MAX_PAYLOAD_BYTES,
    check_id,
    check_priority,
    check_seconds,
    from_json,
    to_json,
)

from raftflow.errors import InvalidArgumentError, LeaseError, LeaseLostError

QUERIES = load("raftflow.transports", "queue.sql", "queue")

#: Upper bound of leases one claim may take (one request, one statement).
MAX_CLAIM_BATCH = 256

#: Statements a claimer appends to the claim's transaction, given its token and ``now``.
ClaimContext = Callable[[str, float], tuple[Statement, ...]]


@dataclass(frozen=True, slots=True)
class Claim:
    """What one claim request leased, and its response (for the ``context`` reads)."""

    leases: list[Lease]
    response: Response


class QueueFlows:
    """The queue's logic; :class:`~raftflow.transports.transport.SqlTransport` and its twin
    drive it.

    It also remembers which leases it issued and has not seen settled, so that a foreign
    (issued by another transport object), hand-made or already settled :class:`Lease` is
    refused before anything is sent. A transport and its ``to_async()`` twin share one
    :class:`QueueFlows`, so their leases are interchangeable.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        max_event_bytes: int = MAX_PAYLOAD_BYTES,
        dedup_window: float = 900.0,
    ) -> None:
        self.clock = clock
        self.origin = uuid.uuid4().hex
        self.max_event_bytes = max_event_bytes
        self.dedup_window = dedup_window
        self._live: set[tuple[int, str]] = set()
        self._settled: deque[tuple[int, str]] = deque(maxlen=4096)
        self._lock = threading.Lock()
        self._keys_forgotten_at = 0.0

    # -- publish --------------------------------------------------------------------------

    def publish(
        self,
        group_id: str,
        event: Any,
        priority: int = 0,
        key: str | None = None,
        lane: str | None = None,
    ) -> Flow[None]:
        check_id(group_id, what="group_id")
        check_priority(priority)
        if lane is not None:
            check_lane(lane)
        text = to_json(event, what="event", limit=self.max_event_bytes)
        key = uuid.uuid4().hex if key is None else check_id(key, what="key")
        now = yield from self.clock.now()
        params = {
            "group_id": group_id,
            "event": text,
            "priority": priority,
            "now": now,
            "key": key,
            "lane": lane,
        }
        statements = [QUERIES("publish", params), *self.forget_keys(now)]
        response = yield Request(tuple(statements), transaction=False)
        response.raise_for_errors()

    def forget_keys(self, now: float) -> list[Statement]:
        """The delete of publish keys older than the dedup window, once a minute (to send
        with a publish: the keys' table stays the size of the window)."""
        if now - self._keys_forgotten_at <= 60:
            return []
        self._keys_forgotten_at = now
        return [QUERIES("forget_keys", {"cutoff": now - self.dedup_window})]

    # -- claim ----------------------------------------------------------------------------

    def claim(
        self,
        worker_id: str,
        visibility: float,
        limit: int = 1,
        min_priority: int = 0,
        *,
        lanes: Lanes = None,
        context: ClaimContext | None = None,
        track: bool = True,
    ) -> Flow[Claim]:
        """Lease the heads of up to ``limit`` groups: one request, one Raft entry.

        ``lanes``: only groups of these lanes (None: of every lane). ``context`` adds
        statements to the same transaction (the engine reads what it will replay there, so
        the state it reads is the state the lease was granted on). ``track`` false leaves
        the leases out of this object's bookkeeping: the engine settles them through its
        own commits.
        """
        check_id(worker_id, what="worker_id")
        visibility = check_seconds(visibility, what="visibility", allow_zero=False)
        check_priority(min_priority)
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_CLAIM_BATCH
        ):
            raise InvalidArgumentError(f"limit must be an int from 1 to {MAX_CLAIM_BATCH}")
        served = lanes_param(lanes)
        token = f"{worker_id}:{uuid.uuid4().hex}"
        # Never early: a lease is taken over only once its deadline has surely passed on
        # the reference clock, whatever this worker's estimate of it is off by.
        now = yield from earliest(self.clock)
        statements = self.claim_statements(
            token, now, now + visibility, limit, min_priority, served
        )
        extra = context(token, now) if context is not None else ()
        response = yield Request(statements + extra, transaction=True)
        response.raise_for_errors()
        leases = [
            Lease(
                seq=row["seq"],
                group_id=row["group_id"],
                event=from_json(row["event"]),
                token=token,
                expires_at=row["lock_expiry"],
                attempts=row["attempts"],
                origin=self.origin,
            )
            for row in response.result_of("queue.claimed").dicts()
        ]
        # A retry after an ambiguous failure may have leased twice under the same token:
        # keep what was asked for and free the rest at once rather than let it lapse.
        leases, surplus = leases[:limit], leases[limit:]
        if surplus:
            freed = yield Request(
                tuple(self.nack_statement(lease, now, 0.0) for lease in surplus),
                transaction=False,
            )
            freed.raise_for_errors()
        if track:
            with self._lock:
                self._live.update((lease.seq, token) for lease in leases)
        return Claim(leases, response)

    def claimable(self, min_priority: int = 0, lanes: Lanes = None) -> Flow[bool]:
        """Whether a claim would find anything now: a cheap read, no Raft entry."""
        check_priority(min_priority)
        served = lanes_param(lanes)
        now = yield from earliest(self.clock)  # as the claim will see it
        params = {"now": now, "limit": 1, "min_priority": min_priority, "lanes": served}
        name = "claimable" if served is None else "claimable_served"
        response = yield Request((QUERIES(name, params),), level="weak")
        row = response.raise_for_errors()[0].first()
        return bool(row and row["ready"])

    # -- settle ---------------------------------------------------------------------------

    def ack(self, lease: Lease) -> Flow[None]:
        self._check_live(lease)
        yield from self._settle(lease, self.ack_statement(lease), done_if_gone=True)

    def nack(self, lease: Lease, delay: float = 0) -> Flow[None]:
        self._check_live(lease)
        delay = check_seconds(delay, what="delay", allow_zero=True)
        now = yield from self.clock.now()
        yield from self._settle(lease, self.nack_statement(lease, now, delay), done_if_gone=False)

    def extend(self, lease: Lease, visibility: float) -> Flow[Lease]:
        self._check_live(lease)
        visibility = check_seconds(visibility, what="visibility", allow_zero=False)
        now = yield from self.clock.now()
        response = yield Request((self.extend_statement(lease, now + visibility),))
        if response.raise_for_errors()[0].rows_affected != 1:
            # An ambiguous retry finds the deadline already moved; anything else is lost.
            holder = yield from self._holder(lease)
            if not (response.ambiguous and holder and holder["locked_by"] == lease.token):
                self._forget(lease)
                raise LeaseLostError(f"lease on message {lease.seq} of {lease.group_id!r} was lost")
        return replace(lease, expires_at=now + visibility)

    def _settle(self, lease: Lease, statement: Statement, *, done_if_gone: bool) -> Flow[None]:
        """One statement that only touches the row while it holds the caller's token.
        The common case is one round trip; only a zero-row answer reads who holds it."""
        response = yield Request((statement,), transaction=False)
        if response.raise_for_errors()[0].rows_affected == 1:
            self._forget(lease)
            return
        holder = yield from self._holder(lease)
        self._forget(lease)
        # Zero rows after an ambiguous failure: our earlier attempt was applied if the row
        # is gone (ack) or no longer holds someone else's live lease (nack).
        if response.ambiguous and (
            holder is None
            if done_if_gone
            else holder is None or holder["locked_by"] in (None, PARKED)
        ):
            return
        raise LeaseLostError(
            f"lease on message {lease.seq} of group {lease.group_id!r} was lost: it lapsed "
            "and another worker claimed or settled the message"
        )

    def _holder(self, lease: Lease) -> Flow[dict[str, Any] | None]:
        response = yield Request((QUERIES("holder", {"seq": lease.seq}),), level="strong")
        return response.raise_for_errors()[0].first()

    # -- leases the engine settles itself (claimed with ``track=False``) ----------------

    def extend_leases(self, leases: Sequence[Lease], visibility: float) -> Flow[list[Lease | None]]:
        """Renew several leases in one request; None for each one that was lost."""
        now = yield from self.clock.now()
        expiry = now + visibility
        response = yield Request(
            tuple(self.extend_statement(lease, expiry) for lease in leases), transaction=False
        )
        return [
            replace(lease, expires_at=expiry)
            if result.error is None and result.rows_affected == 1
            else None
            for lease, result in zip(leases, response.results)
        ]

    def release_leases(self, leases: Sequence[Lease], delay: float = 0.0) -> Flow[None]:
        """Give leases back: claimable at once, or parked for ``delay`` seconds."""
        now = yield from self.clock.now()
        response = yield Request(
            tuple(self.nack_statement(lease, now, delay) for lease in leases), transaction=False
        )
        response.raise_for_errors()

    def release_group(self, group_id: str, token: str, delay: float = 0.0) -> Flow[None]:
        """Give back whatever message of the group ``token`` holds (after a commit whose
        outcome is unknown, the next event may be leased to it), now or after ``delay``."""
        now = yield from self.clock.now()
        response = yield Request((self.release_group_statement(group_id, token, now, delay),))
        response.raise_for_errors()

    def ack_leases(self, leases: Sequence[Lease]) -> Flow[None]:
        """Delete events that have nothing to run (their execution is gone or finished)."""
        response = yield Request(
            tuple(self.ack_statement(lease) for lease in leases), transaction=False
        )
        response.raise_for_errors()

    # -- statement builders (each touches a row only while it holds the caller's token) ----

    @staticmethod
    def claim_statements(
        token: str,
        now: float,
        expiry: float,
        limit: int,
        min_priority: int,
        lanes: str | None = None,
    ) -> tuple[Statement, ...]:
        """The claim's transaction: lease the heads (of the ``lanes``, a
        :func:`lanes_param`, if given), note the claim time, read them back."""
        params = {
            "token": token,
            "now": now,
            "expiry": expiry,
            "limit": limit,
            "min_priority": min_priority,
            "lanes": lanes,
        }
        return (
            QUERIES("claim" if lanes is None else "claim_served", params),
            QUERIES("touch_claimed_groups", params),
            QUERIES("claimed", params),
        )

    @staticmethod
    def ack_statement(lease: Lease) -> Statement:
        return QUERIES("ack", {"seq": lease.seq, "token": lease.token})

    @staticmethod
    def nack_statement(lease: Lease, now: float, delay: float) -> Statement:
        """Claimable again at once (``delay`` 0), or parked until ``now + delay``."""
        locked_by, expiry = (PARKED, now + delay) if delay > 0 else (None, 0.0)
        return QUERIES(
            "nack",
            {"seq": lease.seq, "token": lease.token, "locked_by": locked_by, "expiry": expiry},
        )

    @staticmethod
    def extend_statement(lease: Lease, expiry: float) -> Statement:
        return QUERIES("extend", {"seq": lease.seq, "token": lease.token, "expiry": expiry})

    @staticmethod
    def release_group_statement(group_id: str, token: str, now: float, delay: float) -> Statement:
        """Give back every message of ``group_id`` that ``token`` holds, whichever its seq
        (after a commit whose outcome is unknown, the next event may be leased to it):
        claimable at once, or parked until ``now + delay``."""
        locked_by, expiry = (PARKED, now + delay) if delay > 0 else (None, 0.0)
        params = {"group_id": group_id, "token": token, "locked_by": locked_by, "expiry": expiry}
        return QUERIES("release_group", params)

    # -- inspection -----------------------------------------------------------------------

    def idle_state(self) -> Flow[tuple[int, float | None]]:
        """Leases held now, and the earliest deadline of a parked message (what a test
        environment with a virtual clock waits for)."""
        response = yield Request((QUERIES("idle_state"),))
        row = response.raise_for_errors()[0].first() or {}
        return int(row.get("leased") or 0), row.get("next_at")

    def stats(self) -> Flow[QueueStats]:
        response = yield Request((QUERIES("stats"),), level="strong")
        row = response.raise_for_errors()[0].first() or {}
        return QueueStats(
            messages=int(row.get("messages") or 0),
            leased=int(row.get("leased") or 0),
            parked=int(row.get("parked") or 0),
            groups=int(row.get("groups") or 0),
        )

    # -- lease bookkeeping ----------------------------------------------------------------

    def _check_live(self, lease: object) -> None:
        if not isinstance(lease, Lease):
            raise InvalidArgumentError(f"expected a Lease, not {type(lease).__name__}")
        if lease.origin != self.origin:
            raise LeaseError(
                f"lease on message {lease.seq} was not issued by this transport (or its "
                "to_async() twin): a lease is settled where it was claimed"
            )
        key = (lease.seq, lease.token)
        with self._lock:
            if key not in self._live:
                state = "already settled" if key in self._settled else "not live"
                raise LeaseError(f"lease on message {lease.seq} is {state}")

    def _forget(self, lease: Lease) -> None:
        key = (lease.seq, lease.token)
        with self._lock:
            self._live.discard(key)
            self._settled.append(key)
