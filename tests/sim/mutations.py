"""Planted bugs, each behind a name: the simulator must catch every one (tests/sim/test_sim.py).

They change nothing in the engine's files: a mutation rewrites the SQL the simulated
cluster receives, or patches a function for the duration of one simulation.

- ``no-fence``: a step checkpoint within a worker's turn (``lean_commit``, ``lean_step``) no
  longer checks that the committer still holds the lease -- a stalled worker's late result
  is recorded.
- ``no-final-fence``: the outcome of an execution committed lean (``lean_final`` or
  ``lean_final_unlinked``, and ``lean_final_step``) no longer checks the lease -- a stalled
  worker's late outcome and last record are written over another worker's run (the ack
  stays fenced).
- ``stale-not-found``: the store believes a ``weak`` "not found" (the chaos suite's bug 2,
  fixed in 2e133ac): a read right after a start, served stale, says the execution is missing.
- ``heartbeat-race``: the lease a commit leaves the worker is applied a moment after the
  commit is done, not inside it (the chaos suite's bug 1, fixed in 491c64c): a heartbeat in
  between extends the deleted message and drops a live lease.
- ``early-timers``: wake times and deadlines on the clock's midpoint estimate, ignoring its
  uncertainty (the engine before the simulator found it, seeds 2711 and 2780): a durable
  sleep set by a worker whose estimate is behind ends early.
- ``tx-fence``: the fence of a request carrying transaction steps no longer checks that
  each step is not recorded yet: the retry of an ambiguous commit that did apply applies
  the step's writes (the ledger's deposit) a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from raftflow.engine.workflow import activation as activation_module
from raftflow.stores import flows as store_flows
from raftflow.stores.commit import Commit, CommitOutcome


@dataclass(frozen=True)
class Mutation:
    name: str

    def rewrite(self, sql: str) -> str:
        return sql

    def patch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def on_worker(self, worker: Any) -> None:
        return None


_LEAN_FENCE = re.compile(
    r"AND m\.locked_by = (json_extract\(c\.value, '\$\.lease_token'\)|:lease_token)"
)


class NoFence(Mutation):
    def rewrite(self, sql: str) -> str:
        if "INSERT OR IGNORE INTO steps" in sql:
            return _LEAN_FENCE.sub("", sql)
        return sql


_FINAL_FENCE = re.compile(
    r"AND EXISTS \(SELECT 1 FROM messages AS m WHERE m\.seq = :lease_seq\s+"
    r"AND m\.locked_by = :lease_token\)"
)


class NoFinalFence(Mutation):
    def rewrite(self, sql: str) -> str:
        if any(w in sql for w in ("UPDATE executions SET", "REPLACE INTO", "INSERT INTO steps")):
            return _FINAL_FENCE.sub("", sql)
        return sql


class StaleNotFound(Mutation):
    @contextlib.contextmanager
    def patch(self) -> Iterator[None]:  # type: ignore[override]
        original = store_flows.read

        def believe_weak(statement: Any, *, strong_if_empty: bool = False) -> Any:
            return original(statement, strong_if_empty=False)

        store_flows.read = believe_weak  # type: ignore[assignment]
        try:
            yield
        finally:
            store_flows.read = original  # type: ignore[assignment]


class HeartbeatRace(Mutation):
    @contextlib.contextmanager
    def patch(self) -> Iterator[None]:  # type: ignore[override]
        cls = activation_module.Activation
        original = cls.commit

        async def late_lease(self: Any, commit: Commit) -> CommitOutcome:
            self.committing = True
            self.commits += 1
            try:
                outcome: CommitOutcome = await self.host.commit(commit)
            except Exception as exc:
                raise self.give_up("its commit failed", exc) from exc
            finally:
                self.committing = False
            if outcome.applied:
                # As the sync path did before 491c64c: the workflow's side takes the new
                # lease after the commit returned -- a moment the heartbeat can see.
                await asyncio.sleep(0.3)
                self.turn_steps += 1
                if not commit.lean:
                    self.commit_id = commit.commit_id
                if outcome.next_seq is None:
                    self.held = False
                elif outcome.next_expiry is not None:
                    self.lease = replace(
                        self.lease, seq=outcome.next_seq, expires_at=outcome.next_expiry
                    )
            return outcome

        cls.commit = late_lease  # type: ignore[method-assign]
        try:
            yield
        finally:
            cls.commit = original  # type: ignore[method-assign]


class EarlyTimers(Mutation):
    """Timers on the clock's midpoint estimate, as before the fix: a sleep set by a worker
    whose estimate is behind, and fired by one whose estimate is not, ends early."""

    @contextlib.contextmanager
    def patch(self) -> Iterator[None]:  # type: ignore[override]
        cls = activation_module.Activation
        saved = (cls.after, cls.passed, cls.remaining)
        cls.after = lambda self, seconds, now=None: (  # type: ignore[method-assign]
            (self.now() if now is None else now) + seconds
        )
        cls.passed = lambda self, deadline: self.now() >= deadline  # type: ignore[method-assign]
        cls.remaining = lambda self, deadline: deadline - self.now()  # type: ignore[method-assign]
        try:
            yield
        finally:
            cls.after, cls.passed, cls.remaining = saved  # type: ignore[method-assign]


_FENCE_APPLIED = re.compile(
    r"\n   OR CASE WHEN json_extract\(c\.value, '\$\.lean'\).*?\nEND", re.DOTALL
)


class TxFence(Mutation):
    """The transaction steps' fence no longer checks that the step is not recorded yet: an
    ambiguous commit retried after it applied applies the step's writes a second time."""

    def rewrite(self, sql: str) -> str:
        if sql.startswith("INSERT INTO transaction_checks") and "cancel_reason" in sql:
            return _FENCE_APPLIED.sub("", sql)
        return sql


MUTATIONS: dict[str, Mutation] = {
    "no-fence": NoFence("no-fence"),
    "no-final-fence": NoFinalFence("no-final-fence"),
    "stale-not-found": StaleNotFound("stale-not-found"),
    "heartbeat-race": HeartbeatRace("heartbeat-race"),
    "early-timers": EarlyTimers("early-timers"),
    "tx-fence": TxFence("tx-fence"),
}
