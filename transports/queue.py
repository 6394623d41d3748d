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
(:class:`~raftflow.transports.clock.ClusterClock`). The spec's claim needs three round trips and
two Raft entries.

Retries are safe: a publish carries an idempotency key, and ack/nack/extend touch a row
only while it still holds the caller's token, so a retry after an ambiguous failure
never settles someone else's lease.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from raftflow.transports.base import PARKED, Lease, QueueStats
from raftflow.transports.catalogue import load
from raftflow.transports.clock import Clock
from raftflow.transports.db import Flow, Request, Response, Statement
from raftflow.transports.errors import InvalidArgumentError, LeaseError, LeaseLostError
from raftflow.transports.payload import (
    MAX_PAYLOAD_BYTES,
    check_id,
    check_priority,
    check_seconds,
    from_json,
    to_json,
)

QUERIES = load("raftflow.transports", "queue.sql", "queue")

#: Upper bound of leases one claim may take (one request, one statement).
MAX_CLAIM_BATCH = 256


class QueueFlows:
    """The queue's logic; :class:`~raftflow.transports.sql.SqlTransport` and its twin drive it.

    It also remembers which leases it issued and has not seen settled, so that a foreign
    or already settled :class:`Lease` is refused before anything is sent.
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

    # -- schema ---------------------------------------------------------------------------

    def create_schema(self) -> Flow[None]:
        response = yield Request(QUERIES.schema(), transaction=True)
        response.raise_for_errors()

    # -- publish --------------------------------------------------------------------------

    def publish(
        self, group_id: str, event: Any, priority: int = 0, key: str | None = None
    ) -> Flow[None]:
        check_id(group_id, what="group_id")
        check_priority(priority)
        text = to_json(event, what="event", limit=self.max_event_bytes)
        key = uuid.uuid4().hex if key is None else check_id(key, what="key")
        now = yield from self.clock.now()
        params = {"group_id": group_id, "event": text, "priority": priority, "now": now, "key": key}
        statements = [QUERIES("publish", params)]
        if now - self._keys_forgotten_at > 60:
            self._keys_forgotten_at = now
            statements.append(QUERIES("forget_keys", {"cutoff": now - self.dedup_window}))
        response = yield Request(tuple(statements), transaction=False)
        response.raise_for_errors()

    # -- claim ----------------------------------------------------------------------------

    def claim(
        self, worker_id: str, visibility: float, limit: int = 1, min_priority: int = 0
    ) -> Flow[list[Lease]]:
        check_id(worker_id, what="worker_id")
        visibility = check_seconds(visibility, what="visibility", allow_zero=False)
        check_priority(min_priority)
        if (
            isinstance(limit, bool)
            or not isinstance(limit, int)
            or not 1 <= limit <= MAX_CLAIM_BATCH
        ):
            raise InvalidArgumentError(f"limit must be an int from 1 to {MAX_CLAIM_BATCH}")
        token = f"{worker_id}:{uuid.uuid4().hex}"
        now = yield from self.clock.now()
        response = yield self.claim_request(token, now, now + visibility, limit, min_priority)
        response.raise_for_errors()
        leases = self.leases_from(response, token)
        # A retry after an ambiguous failure may have leased twice under the same token:
        # keep what was asked for and free the rest at once rather than let it lapse.
        extra = leases[limit:]
        if extra:
            leases = leases[:limit]
            freed = yield self.release_request(extra, now, 0.0)
            freed.raise_for_errors()
            for lease in extra:
                self._forget(lease)
        return leases

    def claim_request(
        self, token: str, now: float, expiry: float, limit: int, min_priority: int
    ) -> Request:
        """The one-round-trip claim; the engine appends its own reads to it."""
        params = {
            "token": token,
            "now": now,
            "expiry": expiry,
            "limit": limit,
            "min_priority": min_priority,
        }
        return Request(
            (
                QUERIES("claim", params),
                QUERIES("touch_claimed_groups", params),
                QUERIES("claimed", params),
            ),
            transaction=True,
        )

    def release_request(self, leases: Sequence[Lease], now: float, delay: float) -> Request:
        """Give leases back without lease bookkeeping (the engine's and claim's own use):
        claimable at once, or parked for ``delay`` seconds. Statement by statement."""
        return Request(
            tuple(self._settle_statement(lease, now, delay) for lease in leases),
            transaction=False,
        )

    def ack_request(self, leases: Sequence[Lease]) -> Request:
        """Ack leases without lease bookkeeping (the engine's own use)."""
        return Request(
            tuple(QUERIES("ack", {"seq": le.seq, "token": le.token}) for le in leases),
            transaction=False,
        )

    def extend_request(self, leases: Sequence[Lease], now: float, visibility: float) -> Request:
        """Heartbeat several leases in one request; result ``i`` has ``rows_affected`` 1
        when lease ``i`` is still held (and now runs until ``now + visibility``)."""
        return Request(
            tuple(
                QUERIES("extend", {"seq": le.seq, "token": le.token, "expiry": now + visibility})
                for le in leases
            ),
            transaction=False,
        )

    def leases_from(self, response: Response, token: str, *, track: bool = True) -> list[Lease]:
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
        if track:
            with self._lock:
                self._live.update((lease.seq, token) for lease in leases)
        return leases

    def claimable(self, min_priority: int = 0) -> Flow[bool]:
        """Whether a claim would find anything now: a cheap read, no Raft entry."""
        check_priority(min_priority)
        now = yield from self.clock.now()
        params = {"now": now, "limit": 1, "min_priority": min_priority}
        response = yield Request((QUERIES("claimable", params),), level="weak")
        row = response.raise_for_errors()[0].first()
        return bool(row and row["ready"])

    # -- settle ---------------------------------------------------------------------------

    def ack(self, lease: Lease) -> Flow[None]:
        self._check_live(lease)
        statement = QUERIES("ack", {"seq": lease.seq, "token": lease.token})
        yield from self._settle(lease, statement, done_if_gone=True)

    def nack(self, lease: Lease, delay: float = 0) -> Flow[None]:
        self._check_live(lease)
        delay = check_seconds(delay, what="delay", allow_zero=True)
        now = yield from self.clock.now()
        yield from self._settle(
            lease, self._settle_statement(lease, now, delay), done_if_gone=False
        )

    def extend(self, lease: Lease, visibility: float) -> Flow[Lease]:
        self._check_live(lease)
        visibility = check_seconds(visibility, what="visibility", allow_zero=False)
        now = yield from self.clock.now()
        params = {"seq": lease.seq, "token": lease.token, "expiry": now + visibility}
        response = yield Request((QUERIES("extend", params),), transaction=False)
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

    def _settle_statement(self, lease: Lease, now: float | None, delay: float) -> Statement:
        if delay > 0 and now is not None:
            locked_by, expiry = PARKED, now + delay
        else:
            locked_by, expiry = None, 0.0
        return QUERIES(
            "nack",
            {"seq": lease.seq, "token": lease.token, "locked_by": locked_by, "expiry": expiry},
        )

    # -- inspection -----------------------------------------------------------------------

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
            raise LeaseError(f"lease on message {lease.seq} was not issued by this transport")
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
