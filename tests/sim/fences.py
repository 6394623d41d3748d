"""Every clause that fences a write, removed on purpose: the simulator must catch each
removal as the violation it allows (docs/reliability.md, "Every fence, removed").

A fence mutation names its clause by where it lives -- a statement of a SQL catalogue
(stores/store.sql, transports/queue.sql...) by its name, or a trigger of the schema by its
name, as the latest migration defines it (read back from the migrated database) -- and a
pattern of the clause within it. A name that no longer exists, or a pattern that no longer
matches, raises :class:`FenceGone` (when the module loads, for statements; when a run
starts, for triggers): a mutation can never silently become a no-op. The statement is then
replaced, in what the simulated cluster receives, by its text with the clause removed; a
trigger is dropped and created again without it in the simulated cluster's databases for
the run (and restored after it).

What each removal must be caught as (``expects``, the kinds of tests/sim/verdicts.py):
a lease or token check -- ``stale-write``: a write applied for a worker whose lease token
did not hold the message it named (tests/sim/audit.py checks every such write); the
claim's readiness -- ``double-lease``: a group leased to a second worker while another's
lease still lived; the claim's lanes -- ``served``: a worker ran an execution of a queue
it does not serve; the concurrency limit's gate and slot count -- ``limit-exceeded``; the
transaction fence's "not recorded yet" -- ``applied-twice`` (a deposit's ledger row
written twice); the schedule's fire -- ``stale-write`` or ``slot`` (a cron time started
twice, or not once).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from raftflow.stores.flows import QUERIES as STORE
from raftflow.transports.db.catalogue import Catalogue
from raftflow.transports.queue import QUERIES as QUEUE

from tests.sim.mutation import Mutation


class FenceGone(AssertionError):
    """A fence mutation's clause is not where it says any more: update tests/sim/fences.py."""


#: A parameter or column a lease check compares: ``:lease_seq``, ``NEW.token``,
#: ``json_extract(c.value, '$.lease_token')``.
_OPERAND = r"(?::\w+|NEW\.\w+|json_extract\(c\.value,\s*'\$\.\w+'\))"
#: "The message is leased to this token": every lease check of a commit, in any encoding.
HELD = (
    r"EXISTS\s*\(\s*SELECT\s+1\s+FROM\s+messages(?:\s+AS\s+m)?\s+WHERE\s+(?:m\.)?seq\s*=\s*"
    + _OPERAND
    + r"\s+AND\s+(?:m\.)?locked_by\s*=\s*"
    + _OPERAND
    + r"\s*\)"
)
#: The token check of a queue operation on one message (ack, nack, extend, release).
TOKEN = r"\s+AND\s+locked_by\s*=\s*:(?:lease_)?token\b"

STALE = frozenset({"stale-write"})


def _sub(where: str, text: str, pattern: str, replacement: str) -> str:
    changed, count = re.subn(pattern, replacement, text, flags=re.DOTALL)
    if count == 0:
        raise FenceGone(f"{where}: the clause's pattern no longer matches {pattern!r}")
    return changed


@dataclass
class StatementFence(Mutation):
    """A clause removed from named statements of a SQL catalogue."""

    catalogue: Catalogue | None = None
    statements: tuple[str, ...] = ()
    pattern: str = ""
    replacement: str = "1"
    _mutated: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        assert self.catalogue is not None and self.statements
        for name in self.statements:
            where = f"{self.name}: {self.catalogue.prefix}.{name}"
            original = self.catalogue.queries.get(name)
            if original is None:
                raise FenceGone(f"{where}: no such statement any more")
            self._mutated[original] = _sub(where, original, self.pattern, self.replacement)

    def rewrite(self, sql: str) -> str:
        return self._mutated.get(sql, sql)


@dataclass
class TriggerFence(Mutation):
    """A clause removed from a trigger of the schema, for one run."""

    trigger: str = ""
    pattern: str = ""
    replacement: str = "1"

    def mutated(self, db: Any) -> tuple[str, str]:
        """The trigger's SQL as the migrated database holds it, and without the clause."""
        row = db.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (self.trigger,)
        ).fetchone()
        where = f"{self.name}: trigger {self.trigger}"
        if row is None:
            raise FenceGone(f"{where}: no such trigger in the migrated schema any more")
        return row[0], _sub(where, row[0], self.pattern, self.replacement)

    @contextlib.contextmanager
    def schema(self, cluster: Any) -> Iterator[None]:  # type: ignore[override]
        databases = [cluster.main._db, cluster.stale._db]
        original, mutated = self.mutated(databases[0])
        replaced = []
        try:
            for db in databases:
                db.execute(f'DROP TRIGGER "{self.trigger}"')
                replaced.append(db)
                db.execute(mutated)
            yield
        finally:
            for db in replaced:
                db.execute(f'DROP TRIGGER IF EXISTS "{self.trigger}"')
                db.execute(original)


@dataclass
class Combined(Mutation):
    """Several mutations at once (a planted bug that removes a family of clauses)."""

    parts: tuple[Mutation, ...] = ()

    def rewrite(self, sql: str) -> str:
        for part in self.parts:
            sql = part.rewrite(sql)
        return sql

    @contextlib.contextmanager
    def schema(self, cluster: Any) -> Iterator[None]:  # type: ignore[override]
        with contextlib.ExitStack() as stack:
            for part in self.parts:
                stack.enter_context(part.schema(cluster))
            yield


def _lease(name: str, statement: str, clause: str) -> StatementFence:
    return StatementFence(name, STALE, clause, STORE, (statement,), HELD)


def _token(name: str, catalogue: Catalogue, statement: str, clause: str) -> StatementFence:
    return StatementFence(name, STALE, clause, catalogue, (statement,), TOKEN, "")


_FENCES: list[Mutation] = [
    # -- the lease check of every commit encoding -----------------------------------------
    TriggerFence(
        "commit-trigger-lease",
        STALE,
        "trigger `execution_commit_fenced` (full commits): the lease check",
        trigger="execution_commit_fenced",
        pattern=HELD,
    ),
    _lease("lean-step-lease", "lean_step", "`lean_step` (a lone step within a turn): the lease"),
    _lease("lean-commit-lease", "lean_commit", "`lean_commit` (batched steps): the lease check"),
    _lease("lean-final-lease", "lean_final", "`lean_final` (an outcome): the lease check"),
    _lease(
        "lean-final-unlinked-lease",
        "lean_final_unlinked",
        "`lean_final_unlinked` (an outcome, no parent, no limit): the lease check",
    ),
    _lease("lean-final-step-lease", "lean_final_step", "`lean_final_step`: the lease check"),
    StatementFence(
        "lean-final-ack-guard",
        STALE,
        "`lean_final_ack` (the outcome's ack): the token check and the commit check",
        STORE,
        ("lean_final_ack",),
        TOKEN + r"\s+AND\s+EXISTS\s*\(SELECT 1 FROM executions WHERE id = :execution_id"
        r"\s+AND commit_id = :commit_id\)",
        "",
    ),
    _lease("lean-finals-lease", "lean_finals", "`lean_finals` (batched outcomes): the lease"),
    _lease("lean-finals-steps-lease", "lean_finals_steps", "`lean_finals_steps`: the lease"),
    StatementFence(
        "lean-finals-ack-token",
        STALE,
        "`lean_finals_ack` (batched acks): the token in `(seq, locked_by) IN`",
        STORE,
        ("lean_finals_ack",),
        r"\(seq,\s*locked_by\)\s+IN\s+\(SELECT\s+(json_extract\(c\.value,\s*'\$\.lease_seq'\)),"
        r"\s*json_extract\(c\.value,\s*'\$\.lease_token'\)",
        r"seq IN (SELECT \1",
    ),
    TriggerFence(
        "continue-lease",
        STALE,
        "trigger `execution_continue` (continue_as_new): the lease check",
        trigger="execution_continue",
        pattern=HELD,
    ),
    # -- the transaction guard --------------------------------------------------------------
    StatementFence(
        "tx-fence",
        frozenset({"applied-twice"}),
        "`transaction_fence`: no transaction step is recorded yet",
        STORE,
        ("transaction_fence",),
        r"\n\s*OR CASE WHEN json_extract\(c\.value, '\$\.lean'\).*?\nEND",
        "",
    ),
    # -- the queue: the claim's exclusivity, the token of every lease operation ------------
    StatementFence(
        "claim-ready",
        frozenset({"double-lease"}),
        "`claim`: only a group whose head is free (or its lease lapsed) is taken",
        QUEUE,
        ("claim", "claim_served"),
        r"\s+AND\s+ready_at\s*<=\s*:now",
        "",
    ),
    StatementFence(
        "claim-lanes",
        frozenset({"served"}),
        "`claim_served`: only groups of the lanes the worker serves are taken",
        QUEUE,
        ("claim_served", "claimable_served"),
        r"\blane\s*=\s*l\.value\s+AND\s+",
        "",
    ),
    _token("extend-token", QUEUE, "extend", "`extend` (the heartbeat): the token check"),
    _token("nack-token", QUEUE, "nack", "`nack` (release, park): the token check"),
    _token("ack-token", QUEUE, "ack", "`ack` (an event with nothing to run): the token check"),
    _token(
        "release-token",
        QUEUE,
        "release_group",
        "`release_group` (the hand-back): the token check",
    ),
    # -- schedules and limits -------------------------------------------------------------
    TriggerFence(
        "schedule-fire-lease",
        frozenset({"stale-write", "slot"}),
        "trigger `schedule_fire` (a cron time's start): the lease check",
        trigger="schedule_fire",
        pattern=HELD,
    ),
    TriggerFence(
        "limit-gate",
        frozenset({"limit-exceeded"}),
        "trigger `limit_gate`: a waiting execution's group is made unclaimable",
        trigger="limit_gate",
        pattern=r"UPDATE groups SET ready_at = COALESCE\(.*?WHERE group_id = NEW\.id;",
        replacement="",
    ),
    TriggerFence(
        "limit-slots",
        frozenset({"limit-exceeded"}),
        "trigger `limit_open`: at most the key's free slots are admitted",
        trigger="limit_open",
        pattern=r"\s+LIMIT max\(0, NEW\.max - .*?\)\)(?=\);\s*END)",
        replacement="",
    ),
]

#: Clauses that fence a write another clause fences too: removed alone, they allow nothing
#: (tests/sim/table.py runs them all the same: no seed may catch them). Each is in
#: :data:`FENCES` with the clause that backs it up.
_ALONE: list[Mutation] = [
    _token(
        "lean-final-ack-token",
        STORE,
        "lean_final_ack",
        "`lean_final_ack` (the outcome's ack): the token check alone",
    ),
    StatementFence(
        "tx-fence-lease",
        STALE,
        "`transaction_fence`: every transaction step's lease holds",
        STORE,
        ("transaction_fence",),
        HELD,
    ),
    StatementFence(
        "tx-fence-cancel",
        STALE,
        "`transaction_fence`: no cancel waits for a lean transaction commit",
        STORE,
        ("transaction_fence",),
        r"\n\s*OR \(json_extract\(c\.value, '\$\.lean'\)\s+AND \(SELECT e\.cancel_reason.*?"
        r"IS NOT NULL\)",
        "",
    ),
    StatementFence(
        "tx-recorded",
        STALE,
        "`transaction_recorded`: each transaction step's record written by this commit",
        STORE,
        ("transaction_recorded",),
        r"WHERE NOT \(CASE WHEN .*?\nEND\)",
        "WHERE 0",
    ),
]
_WHY = {
    "lean-final-ack-token": "the ack deletes the message only if the execution's commit id is "
    "this commit's, which only its fenced `lean_final` can have written (the token check is "
    "evaluated on the same state): both removed, `lean-final-ack-guard`",
    "tx-fence-lease": "a stale worker's commit statements are fenced, so `transaction_recorded` "
    "finds its record missing and aborts the request, its writes with it: both removed, "
    "`tx-guard-lease`",
    "tx-fence-cancel": "the lean commit skipped for the cancel leaves its record missing, so "
    "`transaction_recorded` aborts the request: both removed, `tx-guard-cancel`",
    "tx-recorded": "`transaction_fence` checks, on the same state, every condition under "
    "which a commit statement of the request would skip its record (the lease, a cancel for a "
    "lean one, an earlier attempt): with both removed, `tx-guard-lease` and `tx-guard-cancel`",
}
EQUIVALENT: dict[str, tuple[Mutation, str]] = {m.name: (m, _WHY[m.name]) for m in _ALONE}
_alone = {m.name: m for m in _ALONE}
_FENCES += [
    Combined(
        "tx-guard-lease",
        STALE,
        "`transaction_fence`'s lease check and `transaction_recorded`",
        parts=(_alone["tx-fence-lease"], _alone["tx-recorded"]),
    ),
    Combined(
        "tx-guard-cancel",
        frozenset({"unrecorded", "applied-twice"}),
        "`transaction_fence`'s cancel check and `transaction_recorded`",
        parts=(_alone["tx-fence-cancel"], _alone["tx-recorded"]),
    ),
]

FENCES: dict[str, Mutation] = {m.name: m for m in _FENCES}
