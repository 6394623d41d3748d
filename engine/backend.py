"""The engine's backend: every database operation of the engine, as named I/O-free flows.

The step path, and where each piece of its SQL lives (one hop each)::

    engine.start(wf, input) -- start ----> stores/store.sql `start`: the execution's row and
                                           its first event, in one statement
    idle worker ----------- claimable ---> transports/queue.sql `claimable` (a weak read)
    worker ---------------- claim -------> transports/queue.sql `claim`, plus store.sql
                                           `mark_claimed_running` and `claimed_*` in the
                                           same transaction: lease, mark running, read
                                           what the replay needs (one Raft entry)
    the workflow runs; a step runs; the next step call (or the workflow's return)
                  --------- commit ------> stores/store.sql `commit` -> trigger
                                           `execution_commit_fenced`: check the lease,
                                           record the step, ack the event, publish the
                                           next one (kept leased to the worker while its
                                           turn lasts: no claim for the next step)
    the workflow returns -- commit ------> stores/store.sql `lean_final`, `lean_final_step`,
                                           `lean_final_ack` (the outcome, the last record, the
                                           ack: plain fenced statements, one transaction);
                                           a step within a turn: `lean_commit`
    a transaction step's -- commit ------> the same, with its writes, in one transaction:
    record (and writes)                    store.sql `transaction_fence`, the writes and
                                           `transaction_rows`, the commit statements,
                                           `transaction_recorded` (EngineFlows._transaction)
    a long step ----------- extend ------> transports/queue.sql `extend` (one per beat)
    end of a turn, drain -- release -----> transports/queue.sql `nack` (now or parked)
    a failed commit ------- hand_back ---> transports/queue.sql `release_group`
    nothing to run -------- ack ---------> transports/queue.sql `ack`

What is good and stays: the SQL is named statements in ``.sql`` catalogues
(:mod:`raftflow.transports.db.catalogue`); the commit is fenced by a ``RAISE(IGNORE)``
trigger, so in a batch a stale worker's row is skipped alone; commits ready together
go as one statement (group commit) with a one-by-one fallback; lease times come from
:class:`~raftflow.transports.db.clock.ClusterClock`; the SQLite connection reproduces
rqlite's request semantics, so none of this has a SQLite special case.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from raftflow.stores.contract import ErrorInfo, ExecutionRecord, Status, StepRecord
from raftflow.stores.flows import QUERIES as STORE
from raftflow.stores.flows import StoreFlows, execution_from_row, step_from_row
from raftflow.transports.contract import Lease
from raftflow.transports.db.database import AsyncDatabase, Database, open_database
from raftflow.transports.db.flow import Flow, Request, Response, Result, Statement
from raftflow.transports.db.schema import ensure
from raftflow.transports.payload import MAX_PAYLOAD_BYTES, from_json
from raftflow.transports.queue import QueueFlows

T = TypeVar("T")

#: Calls of an execution's history read per page (the claim reads the first page).
HISTORY_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Signal:
    """An unread message sent to an execution."""

    seq: int
    topic: str
    payload: Any


@dataclass(frozen=True, slots=True)
class ChildState:
    """A child execution as its parent's claim read it."""

    id: str
    workflow: str
    status: Status
    output: Any
    error: ErrorInfo | None


@dataclass(frozen=True, slots=True)
class Claimed:
    """One leased event and what its replay needs, read in the claim's own transaction."""

    lease: Lease
    execution: ExecutionRecord | None  # None: the execution is gone
    steps: list[StepRecord]
    signals: list[Signal] = field(default_factory=list)
    children: dict[str, ChildState] = field(default_factory=dict)


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
            and self.step_kind in _LEAN_KINDS
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
        row = {name: getattr(self, name) for name in _ROW_FIELDS}
        row["now"] = now
        row["status"] = None if self.status is None else self.status.value
        row["next_expiry"] = expiry if self.next_token else None
        return row


_ROW_FIELDS = [
    name
    for name in Commit.__dataclass_fields__
    if name not in ("status", "writes", "full", "unlinked")
]

#: What the lean statements read of a commit (``fragment.lean_step_values``,
#: ``fragment.lean_fence``, ``lean_outcome``): half the full row's keys, half its JSON to
#: encode on the worker and to parse on every node.
_LEAN_ROW_FIELDS = (
    "execution_id", "lease_seq", "lease_token", "commit_id", "worker_id", "step_idx",
    "step_name", "step_kind", "step_status", "step_output", "step_error", "step_started_at",
    "step_wake_at",
)  # fmt: skip

#: Calls whose record is always a new row, never the completion of a waiting one.
_LEAN_KINDS = frozenset({"step", "sleep", "send", "child", "event"})


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """Whether a commit applied, and the message its committer now leases (if any)."""

    applied: bool
    error: str | None = None
    next_seq: int | None = None
    next_expiry: float | None = None
    #: A transaction step's writes failed (a statement, or its ``expect_rows``): why.
    #: Nothing of it was written; the lease is untouched.
    aborted: str | None = None


class EngineFlows:
    """The engine's operations on its database, each one request unless it says otherwise."""

    def __init__(self, queue: QueueFlows, store: StoreFlows) -> None:
        self.queue = queue
        self.store = store

    def claim(
        self,
        worker_id: str,
        visibility: float,
        limit: int,
        min_priority: int,
        cached: dict[str, tuple[str | None, int]] | None = None,
    ) -> Flow[list[Claimed]]:
        """The queue's claim, with the store's context reads in the same transaction:
        what the replays need -- except the history of executions whose continuation the
        worker keeps (``cached``: their fingerprints) and finds unchanged."""

        def context(token: str, now: float) -> tuple[Statement, ...]:
            return claim_context(token, now, cached or {})

        claim = yield from self.queue.claim(
            worker_id, visibility, limit, min_priority, context=context, track=False
        )
        try:
            return _claimed(claim.leases, claim.response)
        except Exception:
            # Leased but unreadable: give the leases back now rather than let them lapse.
            yield Request(
                tuple(self.queue.nack_statement(lease, 0.0, 0.0) for lease in claim.leases),
                transaction=False,
            )
            raise

    def history(
        self, execution_id: str, have: list[StepRecord], last: int
    ) -> Flow[list[StepRecord]]:
        """The calls ``0..last`` of an execution, reading in pages what ``have`` lacks."""
        steps = list(have)
        while len(steps) <= last:
            params = {"id": execution_id, "first": len(steps), "page": HISTORY_PAGE}
            response = yield Request((STORE("steps_page", params),), level="strong")
            page = [step_from_row(row) for row in response.raise_for_errors()[0].dicts()]
            if not page:
                break
            steps.extend(page)
        return steps

    def commit(self, commits: Sequence[Commit], visibility: float) -> Flow[list[CommitOutcome]]:
        """Many executions' commits in one request (one round trip, one Raft entry), each
        atomic on its own: a fenced one is skipped alone.

        A step recorded within a worker's turn (:attr:`Commit.lean`) is a row of one plain
        fenced INSERT (``lean_commit``: about the cost of any single-row write); an
        outcome with its last record (:attr:`Commit.lean_final`) is three plain fenced
        statements, which make the request a transaction (``lean_final*``: the same rows
        as the trigger's, tests/integration/test_final_commits.py); the others go through
        the ``execution_commits`` view and its trigger (``commit``). A lean
        commit refused while its lease still holds (a cancel waits) is sent again as a
        full one, which ends the turn. A statement error that fails a whole batch (not a
        lease lost: that skips a row) is retried commit by commit, so only the culprit
        fails."""
        now = yield from self.queue.clock.now()
        expiry = now + visibility
        continuing = [c for c in commits if c.continue_input is not None]
        if continuing:  # rare: each its own requests, after the rest of the batch
            rest = [c for c in commits if c.continue_input is None]
            done = (yield from self.commit(rest, visibility)) if rest else []
            by_id = dict(zip((c.commit_id for c in rest), done))
            for commit in continuing:
                by_id[commit.commit_id] = yield from self._continue(commit, visibility)
            return [by_id[c.commit_id] for c in commits]
        if any(c.transactional for c in commits):
            return (yield from self._transaction(commits, visibility, now, expiry))
        lean = [c for c in commits if c.lean]
        finals = [c for c in commits if c.lean_final]
        full = [c for c in commits if not c.lean and not c.lean_final]
        lean_part = _lean_statements(lean, now)
        final_part = _final_statements(finals, now)
        full_part = commit_request(full, now, expiry).statements if full else ()
        # A lean final commit is three statements: a transaction makes them one write.
        response = yield Request(lean_part + final_part + full_part, transaction=bool(finals))
        if finals and any(result.error is not None for result in response.results):
            # Rolled back as a whole (a failing read aside): the batch again, its final
            # commits full -- each commit id tells whether an earlier attempt applied.
            again = [replace(c, full=True) if c.lean_final else c for c in commits]
            return (yield from self.commit(again, visibility))
        return (yield from self._settle(commits, lean, full, response, 0, now, expiry, finals))

    def _settle(
        self,
        commits: Sequence[Commit],
        lean: Sequence[Commit],
        full: Sequence[Commit],
        response: Response,
        offset: int,
        now: float,
        expiry: float,
        finals: Sequence[Commit] = (),
    ) -> Flow[list[CommitOutcome]]:
        """The outcome of each commit from a batch's response (its lean statements from
        ``offset``, then its lean final ones, then its full ones), reading or resending
        what the response leaves open."""
        lean_part = _lean_statements(lean, now)
        final_part = _final_statements(finals, now)
        full_part = commit_request(full, now, expiry).statements if full else ()
        results = response.results[offset:]
        response = Response(
            Request(lean_part + final_part + full_part, False), results, response.ambiguous
        )
        outcomes: dict[str, CommitOutcome] = {}
        resend: list[Commit] = []
        if finals:
            start, end = len(lean_part), len(lean_part) + len(final_part)
            part = Response(Request(final_part, False), results[start:end], response.ambiguous)
            undecided = _final_outcomes(part, finals, outcomes)
            if undecided:  # rare: a stale lease, or an ambiguous attempt -- read what happened
                yield from _settle(
                    "final_outcome", undecided, _applied, now, expiry, outcomes, resend
                )
            results = results[:start] + results[end:]
            response = Response(Request(lean_part + full_part, False), results, response.ambiguous)
        split = len(lean_part)
        if lean:
            part = Response(Request(lean_part, False), response.results[:split], response.ambiguous)
            undecided = _lean_outcomes(part, lean, outcomes)
            if undecided:  # rare: zero rows, or an ambiguous attempt -- read what happened
                yield from _settle(
                    "lean_outcome", undecided, _lean_applied, now, expiry, outcomes, resend
                )
        if full:
            part = Response(Request(full_part, False), response.results[split:], response.ambiguous)
            if part[0].error is not None and len(full) > 1:
                resend += full
            else:
                outcomes.update(zip((c.commit_id for c in full), _outcomes(part, len(full))))
        for commit in resend:  # one by one: a statement error fails only its own commit
            single = yield commit_request([commit], now, expiry)
            outcomes[commit.commit_id] = _outcomes(single, 1)[0]
        return [outcomes[c.commit_id] for c in commits]

    def _transaction(
        self, commits: Sequence[Commit], visibility: float, now: float, expiry: float
    ) -> Flow[list[CommitOutcome]]:
        """A batch holding transaction steps: one transactional request (one Raft entry)
        of the fence, each step's writes and their row checks, the batch's commits and
        the recorded check -- all of it applies, or none.

        When it aborts: a step whose own write (or its ``expect_rows``) failed is reported
        ``aborted`` and the rest are sent again; any other failure (the fence, the
        recorded check, another commit's statement, an ambiguous attempt) is settled by
        reading the transaction steps' commit ids back at ``strong`` level: an applied one
        is reported applied (never applied twice), one still held is sent again (alone,
        as a full commit), the others lost their lease."""
        request, owners = transaction_request(commits, now, expiry)
        response = yield request
        failed = next((i for i, r in enumerate(response.results) if r.error is not None), None)
        if failed is None:
            lean = [c for c in commits if c.lean]
            full = [c for c in commits if not c.lean]
            offset = owners.index(None, 1)  # past the fence and the writes
            return (yield from self._settle(commits, lean, full, response, offset, now, expiry))
        outcomes: dict[str, CommitOutcome] = {}
        culprit = owners[failed] if failed < len(owners) else None
        if culprit is not None and not response.ambiguous:
            reason = _abort_reason(request.statements[failed], response.results[failed])
            outcomes[culprit.commit_id] = CommitOutcome(False, error=reason, aborted=reason)
            rest = [c for c in commits if c is not culprit]
            if rest:
                outcomes.update(
                    zip((c.commit_id for c in rest), (yield from self.commit(rest, visibility)))
                )
            return [outcomes[c.commit_id] for c in commits]
        tx = [c for c in commits if c.transactional]
        plain = [c for c in commits if not c.transactional]
        check = yield Request(
            (STORE("transaction_outcome", {"commits": _transaction_batch(tx, now, expiry)}),),
            level="strong",
        )
        rows = {r["position"]: r for r in check.raise_for_errors()[0].dicts()}
        again: list[Commit] = []
        for position, commit in enumerate(tx):
            row = rows.get(position) or {}
            if row.get("applied"):
                outcomes[commit.commit_id] = (
                    _lean_applied(commit)
                    if commit.lean
                    else CommitOutcome(
                        True, next_seq=row["next_seq"], next_expiry=row["next_expiry"]
                    )
                )
            elif row.get("held") and not (commit.full and len(commits) == 1):
                again.append(replace(commit, full=True))
            else:
                error = response.results[failed].error or "lease lost"
                outcomes[commit.commit_id] = CommitOutcome(
                    False, error="lease lost" if not row.get("held") else error
                )
        if plain:
            done = yield from self.commit(plain, visibility)
            outcomes.update(zip((c.commit_id for c in plain), done))
        for commit in again:  # alone: what fails now is its own
            (outcome,) = yield from self.commit([commit], visibility)
            outcomes[commit.commit_id] = outcome
        return [outcomes[c.commit_id] for c in commits]

    def _continue(self, commit: Commit, visibility: float) -> Flow[CommitOutcome]:
        """End a run with continue_as_new: its staged call's commit (keeping the lease),
        then the statement that archives the run and publishes the next one's event."""
        if commit.step_idx is not None:
            staged = replace(
                commit,
                continue_input=None,
                commit_id=uuid.uuid4().hex,
                next_token=commit.lease_token,
            )
            (first,) = yield from self.commit([staged], visibility)
            if not first.applied:
                return first
            commit = replace(commit, lease_seq=first.next_seq or commit.lease_seq)
        now = yield from self.queue.clock.now()
        params = {
            "execution_id": commit.execution_id,
            "lease_seq": commit.lease_seq,
            "lease_token": commit.lease_token,
            "commit_id": commit.commit_id,
            "now": now,
            "input": commit.continue_input,
            "next_event": commit.next_event,
        }
        check = {"execution_id": commit.execution_id, "commit_id": commit.commit_id}
        response = yield Request(
            (STORE("continue", params), STORE("continued", check)), transaction=False
        )
        row = response[1].first() or {}
        if row.get("applied"):
            return CommitOutcome(True)
        return CommitOutcome(False, error=response[0].error or "lease lost")

    def extend(self, leases: Sequence[Lease], visibility: float) -> Flow[list[Lease | None]]:
        """Renew several leases in one request; None for each one that was lost."""
        now = yield from self.queue.clock.now()
        expiry = now + visibility
        response = yield Request(
            tuple(self.queue.extend_statement(lease, expiry) for lease in leases),
            transaction=False,
        )
        return [
            replace(lease, expires_at=expiry)
            if result.error is None and result.rows_affected == 1
            else None
            for lease, result in zip(leases, response.results)
        ]

    def release(self, leases: Sequence[Lease], delay: float = 0.0) -> Flow[None]:
        """Give leases back: claimable at once, or parked for ``delay`` seconds."""
        now = yield from self.queue.clock.now()
        response = yield Request(
            tuple(self.queue.nack_statement(lease, now, delay) for lease in leases),
            transaction=False,
        )
        response.raise_for_errors()

    def hand_back(self, group_id: str, token: str, delay: float = 0.0) -> Flow[None]:
        """Give back whatever message of the group ``token`` holds (after a commit whose
        outcome is unknown, the next event may be leased to it), now or after ``delay``."""
        now = yield from self.queue.clock.now()
        statement = self.queue.release_group_statement(group_id, token, now, delay)
        response = yield Request((statement,))
        response.raise_for_errors()

    def ack(self, leases: Sequence[Lease]) -> Flow[None]:
        """Delete events that have nothing to run (their execution is gone or finished)."""
        response = yield Request(
            tuple(self.queue.ack_statement(lease) for lease in leases), transaction=False
        )
        response.raise_for_errors()


def _claimed(leases: list[Lease], response: Response) -> list[Claimed]:
    executions = {
        row["id"]: execution_from_row(row)
        for row in response.result_of("store.claimed_executions").dicts()
    }
    steps: dict[str, list[StepRecord]] = {}
    for row in response.result_of("store.claimed_steps").dicts():
        steps.setdefault(row["execution_id"], []).append(step_from_row(row))
    signals: dict[str, list[Signal]] = {}
    for row in response.result_of("store.claimed_signals").dicts():
        signal = Signal(row["seq"], row["topic"], from_json(row["payload"]))
        signals.setdefault(row["execution_id"], []).append(signal)
    children: dict[str, dict[str, ChildState]] = {}
    for row in response.result_of("store.claimed_children").dicts():
        children.setdefault(row["parent_id"], {})[row["id"]] = ChildState(
            id=row["id"],
            workflow=row["workflow"],
            status=Status(row["status"]),
            output=None if row["output"] is None else from_json(row["output"]),
            error=None if row["error"] is None else ErrorInfo.from_json(from_json(row["error"])),
        )
    return [
        Claimed(
            lease,
            executions.get(lease.group_id),
            steps.get(lease.group_id, []),
            signals.get(lease.group_id, []),
            children.get(lease.group_id, {}),
        )
        for lease in leases
    ]


def claim_context(
    token: str, now: float, cached: dict[str, tuple[str | None, int]] | None = None
) -> tuple[Statement, ...]:
    params = {
        "token": token,
        "now": now,
        "page": HISTORY_PAGE,
        "cached": json.dumps(cached or {}, separators=(",", ":")),
    }
    return (
        STORE("mark_claimed_running", params),
        STORE("claimed_executions", params),
        STORE("claimed_steps", params),
        STORE("claimed_signals", params),
        STORE("claimed_children", params),
    )


def commit_request(commits: Sequence[Commit], now: float, expiry: float) -> Request:
    """Full commits through the ``execution_commits`` view, and the read of each outcome."""
    params = {"commits": _batch(commits, now, expiry)}
    return Request((STORE("commit", params), STORE("commit_outcome", params)), transaction=False)


def transaction_request(
    commits: Sequence[Commit], now: float, expiry: float
) -> tuple[Request, list[Commit | None]]:
    """The transactional request of a batch holding transaction steps, and which commit
    owns each statement (None: the batch's own statements -- the guards, the commits)."""
    tx = [c for c in commits if c.transactional]
    params = {"commits": _transaction_batch(tx, now, expiry)}
    statements: list[Statement] = [STORE("transaction_fence", params)]
    owners: list[Commit | None] = [None]
    for commit in tx:
        for write in commit.writes:
            statements.append(write.statement)
            owners.append(commit)
            if write.expect_rows is not None:
                statements.append(STORE("transaction_rows", {"expected": write.expect_rows}))
                owners.append(commit)
    lean = [c for c in commits if c.lean]
    full = [c for c in commits if not c.lean]
    statements += _lean_statements(lean, now)
    statements += commit_request(full, now, expiry).statements if full else ()
    statements.append(STORE("transaction_recorded", params))
    owners += [None] * (len(statements) - len(owners))
    return Request(tuple(statements), transaction=True), owners


def _transaction_batch(commits: Sequence[Commit], now: float, expiry: float) -> str:
    rows = [dict(commit.row(now, expiry), lean=commit.lean) for commit in commits]
    return json.dumps(rows, separators=(",", ":"))


def _abort_reason(statement: Statement, result: Result) -> str:
    if statement.name.endswith("transaction_rows"):
        expected = dict(statement.params)["expected"]
        return f"a write changed another number of rows than expect_rows={expected}"
    return f"a write failed: {result.error}"


def _batch(commits: Sequence[Commit], now: float, expiry: float) -> str:
    return json.dumps([commit.row(now, expiry) for commit in commits], separators=(",", ":"))


def _lean_statements(commits: Sequence[Commit], now: float) -> tuple[Statement, ...]:
    """The lean commits' INSERT (``lean_step`` for one), and (for several) the read of
    which applied."""
    if not commits:
        return ()
    rows = [{name: getattr(c, name) for name in _LEAN_ROW_FIELDS} for c in commits]
    for row in rows:
        row["now"] = now
    if len(rows) == 1:  # named parameters: cheaper than json_each for one
        return (STORE("lean_step", rows[0]),)
    params = {"commits": json.dumps(rows, separators=(",", ":"))}
    return (STORE("lean_commit", params), STORE("lean_outcome", params))


def _final_statements(commits: Sequence[Commit], now: float) -> tuple[Statement, ...]:
    """The lean final commits' three writes, and (for several) the read of which applied."""
    if not commits:
        return ()
    if len(commits) == 1:  # named parameters: cheaper than json_each for one
        row = commits[0].row(now, 0.0)
        params = {name: row[name] for name in _FINAL_PARAMS}
        return (
            STORE("lean_final_unlinked" if commits[0].unlinked else "lean_final", params),
            STORE("lean_final_step", params),
            STORE("lean_final_ack", params),
        )
    batch = {"commits": _batch(commits, now, 0.0)}
    return (
        STORE("lean_finals", batch),
        STORE("lean_finals_steps", batch),
        STORE("lean_finals_ack", batch),
        STORE("final_outcome", batch),
    )


#: The parameters of a lone lean final commit's statements.
_FINAL_PARAMS = (
    "execution_id", "lease_seq", "lease_token", "commit_id", "now", "worker_id", "status",
    "output", "error", "step_idx", "step_name", "step_kind", "step_status", "step_output",
    "step_error", "step_started_at", "step_attempts", "step_wake_at",
)  # fmt: skip


def _final_outcomes(
    response: Response, commits: Sequence[Commit], outcomes: dict[str, CommitOutcome]
) -> list[Commit]:
    """Decide what the lean final commits' response tells; return those it does not. The
    execution's row carries the commit id of the commit that last applied to it."""
    if len(commits) == 1:
        (commit,) = commits
        if response[2].rows_affected == 1:  # the ack: the lease held for all three
            outcomes[commit.commit_id] = CommitOutcome(True)
            return []
        return [commit]  # a stale lease, or an ambiguous retry of an applied request
    rows = {row["position"]: row for row in response[3].dicts()}
    undecided = []
    for position, commit in enumerate(commits):
        if (rows.get(position) or {}).get("applied"):
            outcomes[commit.commit_id] = CommitOutcome(True)
        else:
            undecided.append(commit)
    return undecided


def _lean_outcomes(
    response: Response, commits: Sequence[Commit], outcomes: dict[str, CommitOutcome]
) -> list[Commit]:
    """Decide what the lean commits' response tells; return those it does not."""
    if response[0].error is not None:
        return list(commits)  # a statement error: each is read, then resent in full
    if len(commits) == 1:
        (commit,) = commits
        if response[0].rows_affected == 1:
            outcomes[commit.commit_id] = _lean_applied(commit)
            return []
        return [commit]  # refused (lost, or a cancel waits) or an ambiguous retry
    rows = {row["position"]: row for row in response[1].dicts()}
    undecided = []
    for position, commit in enumerate(commits):
        row = rows.get(position) or {}
        if row.get("applied"):
            outcomes[commit.commit_id] = _lean_applied(commit)
        else:
            undecided.append(commit)
    return undecided


def _settle(
    name: str,
    undecided: Sequence[Commit],
    applied: Callable[[Commit], CommitOutcome],
    now: float,
    expiry: float,
    outcomes: dict[str, CommitOutcome],
    resend: list[Commit],
) -> Flow[None]:
    """Commits whose answer did not say whether they applied: read it back (``name``, a
    strong read). Applied ones succeed, those whose lease still holds go again, the rest
    lost their lease."""
    params = {"commits": _batch(undecided, now, expiry)}
    check = yield Request((STORE(name, params),), level="strong")
    rows = {r["position"]: r for r in check.raise_for_errors()[0].dicts()}
    for position, commit in enumerate(undecided):
        row = rows.get(position) or {}
        if row.get("applied"):
            outcomes[commit.commit_id] = applied(commit)
        elif row.get("held"):
            resend.append(commit)
        else:
            outcomes[commit.commit_id] = CommitOutcome(False, error="lease lost")


def _applied(commit: Commit) -> CommitOutcome:
    return CommitOutcome(True)


def _lean_applied(commit: Commit) -> CommitOutcome:
    """The event stays leased as it was: same message, same deadline."""
    return CommitOutcome(True, next_seq=commit.lease_seq, next_expiry=None)


def _outcomes(response: Response, count: int) -> list[CommitOutcome]:
    """A commit whose id the execution records was applied, by this attempt or an earlier
    one of the same request (an ambiguous retry reads the first attempt's effect)."""
    error = response[0].error or response[1].error
    rows = {row["position"]: row for row in response[1].dicts()}
    outcomes = []
    for position in range(count):
        row = rows.get(position)
        if row is None or not row["applied"]:
            outcomes.append(CommitOutcome(False, error=error or "lease lost"))
        else:
            outcomes.append(
                CommitOutcome(True, next_seq=row["next_seq"], next_expiry=row["next_expiry"])
            )
    return outcomes


class Backend:
    """The engine's database (an rqlite cluster, a SQLite file or memory) and its flows."""

    def __init__(self, database: Database, *, max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self.database = database
        self.queue = QueueFlows(database.clock, max_event_bytes=max_payload_bytes)
        self.store = StoreFlows(database.clock, max_payload_bytes=max_payload_bytes)
        self.flows = EngineFlows(self.queue, self.store)

    @property
    def max_payload_bytes(self) -> int:
        return self.store.max_payload_bytes

    def run(self, flow: Flow[T]) -> T:
        return self.database.run(flow)

    def prepare(self, auto_migrate: bool | None = None) -> None:
        """Make sure the database runs this code's schema (:func:`~raftflow.transports.
        schema.ensure`); ``auto_migrate`` None: migrate a SQLite file, not rqlite."""
        self.database.run(ensure(self.database.embedded if auto_migrate is None else auto_migrate))

    def to_async(self) -> AsyncBackend:
        """The async twin for a worker's event loop: a new async connection to the same
        database, the same flows (and so the same clock)."""
        return AsyncBackend(self.database.to_async(), self)

    def close(self) -> None:
        self.database.close()

    def __repr__(self) -> str:
        return f"<Backend {self.database.connection!r}>"


class AsyncBackend:
    """The async twin of :class:`Backend` (made by :meth:`Backend.to_async`)."""

    def __init__(self, database: AsyncDatabase, sync: Backend) -> None:
        self.database = database
        self.queue, self.store, self.flows = sync.queue, sync.store, sync.flows

    async def run(self, flow: Flow[T]) -> T:
        return await self.database.run(flow)

    async def close(self) -> None:
        await self.database.close()


def open_backend(
    url: str | Sequence[str],
    *,
    max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    auto_migrate: bool | None = None,
    **options: Any,
) -> Backend:
    """The engine's backend on ``url`` (``http(s)://`` rqlite, ``sqlite:///path``), its
    schema checked (:meth:`Backend.prepare`); ``options`` go to the rqlite connection
    (``verify``, ``timeout``...)."""
    backend = Backend(open_database(url, **options), max_payload_bytes=max_payload_bytes)
    try:
        backend.prepare(auto_migrate)
    except BaseException:
        backend.close()
        raise
    return backend
