"""A commit: what one step of an execution changes, fenced by the lease of its event.

A :class:`Commit` is the record of one call (a step's result, a wait, a retry's failed
attempt), the execution's new status or outcome, and where its next event goes: kept leased
to the worker while its turn lasts, parked until a time, or free. What the database does
with it -- check the lease, record the call, update the execution, ack the current event
and publish the next, wake a parent -- is :mod:`raftflow.stores.commit_flow`'s, in one
request and one Raft entry for a whole batch of executions' commits.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from raftflow.stores.records import Status
from raftflow.transports.db.flow import Statement


@dataclass(frozen=True, slots=True)
class Write:
    """One buffered write of a transaction step: its compiled statement, and the rows it
    must change (None: any number)."""

    statement: Statement
    expect_rows: int | None = None


@dataclass(frozen=True, slots=True)
class Commit:
    """One fenced commit of an execution's progress (a row of ``execution_commits``).

    ``step_*`` describe a step checkpoint (``step_idx`` None for none); ``status`` with
    ``output`` / ``error`` a status change; ``next_event`` the event to publish after the
    current one, kept leased to ``next_token`` when asked (the worker's turn goes on).
    JSON fields are already serialized text; ``now`` and the next lease's expiry are
    stamped by :meth:`EngineFlows.commit` when the batch is sent.
    """

    execution_id: str
    lease_seq: int
    lease_token: str
    worker_id: str
    commit_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    # The record of a call at ``step_idx`` (an insert, or the completion of a waiting one).
    step_idx: int | None = None
    step_name: str | None = None
    step_kind: str = "step"
    step_status: str | None = None  # succeeded, failed, waiting, retrying
    step_output: str | None = None
    step_error: str | None = None
    step_started_at: float | None = None
    step_attempts: int = 1
    step_wake_at: float | None = None
    step_attempt: str | None = None  # JSON of a failed attempt, appended to the history
    consume_signal: int | None = None  # the signal a recv took
    # The execution's status (and outcome).
    status: Status | None = None
    output: str | None = None
    error: str | None = None
    # The next event: leased to the committer, parked until a time, or free.
    next_event: str | None = None
    next_priority: int = 0
    next_token: str | None = None
    park_until: float | None = None
    wake_topic: str | None = None  # woken at once if a signal of this topic is unread
    wake_child: str | None = None  # woken at once if this child is finished
    # engine.continue_as_new(): the next run's input (JSON); the commit then archives this
    # run (the staged call goes with it first) and starts the next one.
    continue_input: str | None = None
    # A transaction step's writes: applied with this commit in one transaction, or not at
    # all (then the commit is not applied either, and its outcome says why: ``aborted``).
    writes: tuple[Write, ...] = ()
    full: bool = False  # never lean (a lean transaction commit refused while still held)
    # The execution has no parent and no concurrency limit, as its worker knows it: a lean
    # final commit may then skip the status triggers, which would do nothing for it
    # (``lean_final_unlinked``; the statement checks it again).
    unlinked: bool = False

    @property
    def transactional(self) -> bool:
        return bool(self.writes)

    @property
    def lean(self) -> bool:
        """A step recorded within the worker's turn, and nothing else: its event stays
        leased as it is, so the commit is a fenced INSERT of the record alone."""
        return (
            not self.full
            and self.step_idx is not None
            and self.step_kind in LEAN_KINDS
            and self.step_status in ("succeeded", "failed")
            and self.step_attempts == 1
            and self.step_attempt is None
            and self.consume_signal is None
            and self.status is Status.RUNNING
            and self.next_token is not None
            and self.park_until is None
        )

    @property
    def lean_final(self) -> bool:
        """The outcome of the execution (succeeded or failed) with the record of its last
        call, and nothing the trigger chain's statement does beyond three plain writes: no
        next event, no signal taken, no failed attempt appended to a history. Sent as
        ``lean_final``, ``lean_final_step`` and ``lean_final_ack`` (stores/store.sql)."""
        return (
            not self.full
            and not self.writes
            and self.continue_input is None
            and self.status in (Status.SUCCEEDED, Status.FAILED)
            and self.next_event is None
            and self.next_token is None
            and self.park_until is None
            and self.consume_signal is None
            and self.step_attempt is None
        )

    def row(self, now: float, expiry: float) -> dict[str, Any]:
        """The commit as one object of the batch's JSON array."""
        row = {name: getattr(self, name) for name in ROW_FIELDS}
        row["now"] = now
        row["status"] = None if self.status is None else self.status.value
        row["next_expiry"] = expiry if self.next_token else None
        return row


ROW_FIELDS = [
    name
    for name in Commit.__dataclass_fields__
    if name not in ("status", "writes", "full", "unlinked")
]

#: What the lean statements read of a commit (``fragment.lean_step_values``,
#: ``fragment.lean_fence``, ``lean_outcome``): half the full row's keys, half its JSON to
#: encode on the worker and to parse on every node.
LEAN_ROW_FIELDS = (
    "execution_id", "lease_seq", "lease_token", "commit_id", "worker_id", "step_idx",
    "step_name", "step_kind", "step_status", "step_output", "step_error", "step_started_at",
    "step_wake_at",
)  # fmt: skip

#: Calls whose record is always a new row, never the completion of a waiting one.
LEAN_KINDS = frozenset({"step", "sleep", "send", "child", "event", "stream"})


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """Whether a commit applied, and the message its committer now leases (if any)."""

    applied: bool
    error: str | None = None
    next_seq: int | None = None
    next_expiry: float | None = None
    #: A transaction step's writes were refused (its ``expect_rows``, or a statement its
    #: own SQL failed: :mod:`~raftflow.stores.sqlerrors`): why. Nothing of it was
    #: written; the lease is untouched.
    aborted: str | None = None
    #: The database failed a transaction step's writes (disk full, I/O, locked...):
    #: nothing was written, the lease is untouched; never the step's outcome.
    failed: str | None = None
