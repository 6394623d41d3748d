"""Planted bugs, each behind a name, and every fence removed (tests/sim/fences.py): the
simulator must catch each one (tests/sim/table.py, tests/sim/test_fences.py).

They change nothing in the engine's files: a mutation rewrites the SQL the simulated
cluster receives, replaces a trigger of its schema for one run, or patches a function for
the duration of one simulation. A planted bug counts as caught by any violation.

- ``no-fence``: a step checkpoint within a worker's turn (``lean_commit``, ``lean_step``) no
  longer checks that the committer still holds the lease -- a stalled worker's late result
  is recorded (the fences ``lean-commit-lease`` and ``lean-step-lease`` together).
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

(``tx-fence``, planted here before, is the fence of the same name now.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from raftflow.engine.workflow import activation as activation_module
from raftflow.stores import flows as store_flows
from raftflow.stores.commit import Commit, CommitOutcome

from tests.sim.fences import EQUIVALENT, FENCES, Combined
from tests.sim.mutation import Mutation


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


#: The planted bugs (caught by any violation), then every fence removed (tests/sim/fences.py).
PLANTED: dict[str, Mutation] = {
    "no-fence": Combined(
        "no-fence",
        clause="`lean_commit` and `lean_step`: the lease checks",
        parts=(FENCES["lean-commit-lease"], FENCES["lean-step-lease"]),
    ),
    "no-final-fence": Combined(
        "no-final-fence",
        clause="`lean_final`, `lean_final_unlinked`, `lean_final_step`: the lease checks",
        parts=tuple(
            FENCES[f"{name}-lease"]
            for name in ("lean-final", "lean-final-unlinked", "lean-final-step")
        ),
    ),
    "stale-not-found": StaleNotFound(
        "stale-not-found", clause='a `weak` read\'s "not found" is believed'
    ),
    "heartbeat-race": HeartbeatRace(
        "heartbeat-race", clause="a commit's new lease is taken a moment after the commit"
    ),
    "early-timers": EarlyTimers(
        "early-timers", clause="wake times on the clock's midpoint estimate"
    ),
}
MUTATIONS: dict[str, Mutation] = {
    **PLANTED,
    **FENCES,
    **{name: mutation for name, (mutation, _) in EQUIVALENT.items()},
}
