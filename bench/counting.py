"""Exact accounting of the requests a benchmark process sends to rqlite.

A :class:`Tally` counts logical requests by kind (the catalogue name of their first
statement, e.g. ``store.commit``, ``queue.claim``, ``queue.claimable``), whether rqlite
makes a Raft entry of them (every write or mixed request, and ``strong`` reads; ``weak``
and ``none`` reads are answered without one), how many statements they carried, and
how long they took, and requests and Raft entries by cluster (the connection's identity:
a sharded deployment's processes talk to several). HTTP attempts (round trips, retries
included) are the connection's own ``round_trips`` counter.

:func:`instrument` wraps raftflow's rqlite connections *in this process only* (the
benchmark's worker entry point calls it before the worker starts); nothing in engine/,
stores/ or transports/ is changed. It relies on ``AsyncRqliteConnection.send`` and
``Committer.commit`` keeping their signatures.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: The kinds of a commit request (its first statement: a batch holding lean step commits
#: is a ``store.lean_commit`` (``store.lean_step`` for one), one of outcomes only a
#: ``store.lean_final(s)``).
COMMIT_KINDS = (
    "store.commit", "store.lean_commit", "store.lean_step", "store.lean_final",
    "store.lean_finals",
)  # fmt: skip
#: Kinds whose request latencies are kept (every sample, for percentiles).
TIMED_KINDS = (*COMMIT_KINDS, "queue.claim", "queue.claimable", "commit.wait", "naive.claim")


@dataclass
class Tally:
    requests: Counter[str] = field(default_factory=Counter)
    raft: Counter[str] = field(default_factory=Counter)
    statements: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    #: Requests and Raft entries by cluster (``rqlite:<its nodes>``).
    clusters: Counter[str] = field(default_factory=Counter)
    clusters_raft: Counter[str] = field(default_factory=Counter)
    seconds: dict[str, float] = field(default_factory=dict)
    samples: dict[str, list[float]] = field(default_factory=dict)
    #: Keep every latency sample (memory grows with the run: off when measuring RSS).
    keep_samples: bool = True

    def record(
        self,
        kind: str,
        *,
        raft: bool,
        statements: int,
        seconds: float,
        ok: bool = True,
        cluster: str = "",
    ) -> None:
        if not ok:
            self.failed[kind] += 1
            return
        self.requests[kind] += 1
        self.statements[kind] += statements
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
        if cluster:
            self.clusters[cluster] += 1
        if raft:
            self.raft[kind] += 1
            if cluster:
                self.clusters_raft[cluster] += 1
        if kind in TIMED_KINDS:
            self.sample(kind, seconds)

    def sample(self, kind: str, seconds: float) -> None:
        if self.keep_samples:
            self.samples.setdefault(kind, []).append(seconds)

    def snapshot(self) -> dict[str, Any]:
        """Totals so far, and how many latency samples each kind has (to cut windows)."""
        return {
            "requests": dict(self.requests),
            "raft": dict(self.raft),
            "statements": dict(self.statements),
            "failed": dict(self.failed),
            "clusters": dict(self.clusters),
            "clusters_raft": dict(self.clusters_raft),
            "seconds": {k: round(v, 6) for k, v in self.seconds.items()},
            "samples": {k: len(v) for k, v in self.samples.items()},
        }


def is_raft_entry(request: Any) -> bool:
    """Whether rqlite appends this :class:`raftflow.transports.db.flow.Request` to the Raft log."""
    return not request.is_read_only or request.level == "strong"


def kind_of(request: Any) -> str:
    name = request.statements[0].name if request.statements else "empty"
    return str(name)


def instrument(tally: Tally) -> None:
    """Count every request of raftflow's rqlite connections in this process, and time
    every commit from the moment a step hands it to the committer to its outcome."""
    from raftflow.engine.runtime.committer import Committer
    from raftflow.transports.rqlite.client import AsyncRqliteConnection, RqliteConnection

    async_send = AsyncRqliteConnection.send
    sync_send = RqliteConnection.send
    commit = Committer.commit

    def count(connection: Any, request: Any, started: float | None) -> None:
        """One request sent (``started``: when; None: it failed)."""
        if started is None:
            tally.record(kind_of(request), raft=False, statements=0, seconds=0.0, ok=False)
            return
        tally.record(
            kind_of(request),
            raft=is_raft_entry(request),
            statements=len(request.statements),
            seconds=time.perf_counter() - started,
            cluster=connection.identity,
        )

    async def counted_async_send(self: Any, request: Any) -> Any:
        started = time.perf_counter()
        try:
            response = await async_send(self, request)
        except BaseException:
            count(self, request, None)
            raise
        count(self, request, started)
        return response

    def counted_sync_send(self: Any, request: Any) -> Any:
        started = time.perf_counter()
        try:
            response = sync_send(self, request)
        except BaseException:
            count(self, request, None)
            raise
        count(self, request, started)
        return response

    async def timed_commit(self: Any, c: Any) -> Any:
        started = time.perf_counter()
        try:
            return await commit(self, c)
        finally:
            tally.sample("commit.wait", time.perf_counter() - started)

    AsyncRqliteConnection.send = counted_async_send  # type: ignore[method-assign]
    RqliteConnection.send = counted_sync_send  # type: ignore[method-assign]
    Committer.commit = timed_commit  # type: ignore[method-assign,assignment]


def window(before: dict[str, Any], after: dict[str, Any], key: str) -> dict[str, float]:
    """``after[key] - before[key]`` for counter dicts (kinds missing before count 0)."""
    old, new = before.get(key, {}), after.get(key, {})
    out = {k: new[k] - old.get(k, 0) for k in new}
    return {k: v for k, v in out.items() if v}
