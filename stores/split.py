"""A store on another database than its transport: the commit first, then the queue.

When the queue and the state share one database, a commit acks the current event and
publishes the next in its own transaction. On two databases (two rqlite clusters, two
SQLite files) no request spans both, so the store keeps what the commit needs beside the
state, in its own ``messages`` table (the schema is the same on both; the statements are
``split.sql``'s):

- **a mirror of each lease** a worker holds (seq: minus the transport's seq, the same
  token), written with the claim's reads in one transaction of the store. The fenced
  commit checks it as it checks a lease. A later lease of the group's events (a later
  message, or the same one claimed again) supersedes it, so a worker whose transport lease
  lapsed is fenced out of the store from then on; a claim's request that arrives late
  supersedes nothing.
- **an outbox**: everything the store's triggers publish -- a commit's next event, a
  start's first, a park, a wake-up, a parent's news -- lands there first, in the
  transaction that causes it, and is relayed to the transport (:func:`due`,
  :func:`keep`, :func:`publish`, :func:`forget`): published with a key derived from the
  row (so a relay that dies before deleting the row publishes nothing twice), then
  deleted. A park stays until its time, so a signal or a cancel still wakes it early; a
  pending execution's park (a debounced start) stays until a claim takes the execution,
  so a start of the same id still folds into it until then, as on one database.

After a commit that ends a worker's turn, its transport lease is acked (with the relay, in
one request). A worker that dies between the commit and that ack leaves its event to be
delivered again: the next worker replays it, finds the step recorded, and goes on. So an
execution may be handed one extra event, which replays what is recorded; a step is still
recorded once and run at least once, as on one database. A commit never keeps the next
event leased to its worker in the store (``CommitFlows.holds``): the turn ends there, and
the next event goes through the queue.

What needs both in one transaction is refused on a split pair at its boundary: schedules
and concurrency limits (their fences and their admission live in the queue).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from raftflow.stores.claim import claim_context, claimed
from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.records import Claimed
from raftflow.transports.contract import Lease
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock, earliest
from raftflow.transports.db.flow import Flow, Request, Statement
from raftflow.transports.payload import to_json
from raftflow.transports.queue import QUERIES as QUEUE
from raftflow.transports.queue import QueueFlows

SQL = load("raftflow.stores", "split.sql", "split")

#: Events relayed per read of the outbox.
RELAY_BATCH = 200
#: Seconds after which a kept park is relayed again (its relay may have died after
#: marking it and before publishing it).
RELAY_AGAIN = 60.0

T = TypeVar("T")

#: Logged when the transport could not take what the store published (it stays in the
#: store until a relay succeeds) or the acks of ended turns (their events come again).
RELAY_LATER = "the transport is out of reach; its events wait in the store: %s"


def watched(flow: Flow[T], wrote: list[bool]) -> Flow[T]:
    """``flow`` as it is, noting in ``wrote`` whether it sent a write (which may have
    published something for the transport)."""
    try:
        request = next(flow)
        while True:
            if not request.is_read_only and not wrote:
                wrote.append(True)
            request = flow.send((yield request))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def mirror_seq(seq: int) -> int:
    """The store's seq of the mirror of the transport's message ``seq`` (and back)."""
    return -seq


def adopt(
    clock: Clock, leases: Sequence[Lease], cached: dict[str, tuple[str | None, int]] | None
) -> Flow[list[Claimed]]:
    """Mirror a claim's ``leases`` (one token) in the store and read what their runs need,
    in one transaction of the store's database."""
    now = yield from clock.now()
    statements: list[Statement] = []
    for lease in leases:
        params = {
            "queued": lease.seq,
            "group_id": lease.group_id,
            "event": to_json(lease.event, what="event"),
            "priority": 0,
            "now": now,
            "token": lease.token,
            "expiry": lease.expires_at,
            "attempts": lease.attempts,
        }
        order = {k: params[k] for k in ("group_id", "queued", "attempts")}
        statements += (SQL("supersede", order), SQL("mirror", params))
    token = leases[0].token
    statements += (
        SQL("void_refolded", {"token": token}),
        SQL("consume_kept", {"token": token}),
        *claim_context(token, now, cached),
        SQL("drop_finished", {"token": token}),
    )
    response = yield Request(tuple(statements), transaction=True)
    response.raise_for_errors()
    return claimed(list(leases), response)


def for_store(commits: Sequence[Commit]) -> list[Commit]:
    """The commits as the store checks them: fenced by the mirrors, and never keeping a
    next event leased (it must reach the transport first: the turn ends there)."""
    return [
        replace(
            commit,
            lease_seq=mirror_seq(commit.lease_seq),
            next_token=commit.next_token if commit.lean else None,
        )
        for commit in commits
    ]


def settled(commits: Sequence[Commit], outcomes: Sequence[CommitOutcome]) -> list[CommitOutcome]:
    """The store's outcomes in the transport's seqs."""
    return [
        replace(outcome, next_seq=commit.lease_seq) if outcome.next_seq is not None else outcome
        for commit, outcome in zip(commits, outcomes)
    ]


def ended(commits: Sequence[Commit], outcomes: Sequence[CommitOutcome]) -> list[tuple[int, str]]:
    """The transport leases (seq, token) of the turns these commits ended."""
    return [
        (commit.lease_seq, commit.lease_token)
        for commit, outcome in zip(commits, outcomes)
        if outcome.applied and outcome.next_seq is None
    ]


def due(clock: Clock, limit: int = RELAY_BATCH) -> Flow[list[dict[str, Any]]]:
    """The store's events the transport should hold now, oldest first (a read); a park
    once its time has surely come, as a claim takes over a lease (never early)."""
    now = yield from earliest(clock)
    params = {"now": now, "again": int(now - RELAY_AGAIN), "limit": limit}
    response = yield Request((SQL("due", params),))
    return response.raise_for_errors()[0].dicts()


def keep(clock: Clock, rows: Sequence[dict[str, Any]]) -> Flow[list[dict[str, Any]]]:
    """On the store, before the publish: mark the pending executions' parks among ``rows``
    with their keys (kept until a claim takes the execution), and return the rows to
    publish: those still as they were read (a stale read may have seen a park since pushed
    back by a fold). Without a park, all of them: a free event never changes, and one
    already relayed is taken once by the transport, by its key."""
    if not any(row["parked"] for row in rows):
        return list(rows)
    now = yield from clock.now()
    params = {"rows": _relayed(rows), "now": int(now)}
    response = yield Request((SQL("keep", params), SQL("current", params)))
    current = {row["seq"] for row in response.raise_for_errors()[1].dicts()}
    return [row for row in rows if row["seq"] in current]


def publish(
    queue: QueueFlows, rows: Sequence[dict[str, Any]], acks: Sequence[tuple[int, str]]
) -> Flow[None]:
    """On the transport: publish the store's ``rows`` (each once, by its key) and ack
    ``acks``, in one transaction -- the next event before the ack of the current, so the
    group never looks empty in between."""
    if not rows and not acks:
        return
    now = yield from queue.clock.now()
    statements = [
        QUEUE(
            "publish",
            {
                "group_id": row["group_id"],
                "event": row["event"],
                "priority": row["priority"],
                "now": now,
                "key": row["key"],
                "lane": row["lane"],
            },
        )
        for row in rows
    ]
    statements += [QUEUE("ack", {"seq": seq, "token": token}) for seq, token in acks]
    response = yield Request((*statements, *queue.forget_keys(now)), transaction=True)
    response.raise_for_errors()


def forget(rows: Sequence[dict[str, Any]]) -> Flow[None]:
    """On the store, after the publish: delete the rows the transport now holds (not the
    kept parks)."""
    if rows:
        response = yield Request((SQL("forget", {"rows": _relayed(rows)}),))
        response.raise_for_errors()


def _relayed(rows: Sequence[dict[str, Any]]) -> str:
    return json.dumps([{"seq": row["seq"], "key": row["key"]} for row in rows])
