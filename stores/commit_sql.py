"""The statements of a batch of commits and the reading of their answers (no I/O).

Three encodings of one commit, chosen per commit by :mod:`raftflow.stores.commit_flow`:

- *lean* (:attr:`Commit.lean`): a step recorded within the worker's turn is one fenced
  ``INSERT`` of its record (``lean_step`` alone, ``lean_commit`` for several): its event
  stays leased to the worker as it is;
- *lean final* (:attr:`Commit.lean_final`): an execution's outcome with its last record,
  three plain fenced statements in one transaction (``lean_final*``);
- *full*: a row inserted into the ``execution_commits`` view, whose trigger
  ``execution_commit_fenced`` checks the lease, records the call, acks the current event
  and publishes the next (``commit``).

The lean ones write the same rows as the trigger would, bookkeeping aside (which commit
applied, and when): ``tests/integration/test_final_commits.py`` (every outcome scenario of
the trigger chain) and ``test_commit_encodings.py`` (every call recorded within a turn,
plain or with a transaction step's writes) apply each commit both ways and compare tables.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from raftflow.stores.commit import (
    LEAN_ROW_FIELDS,
    Commit,
    CommitOutcome,
)
from raftflow.stores.flows import QUERIES as STORE
from raftflow.stores.sqlerrors import is_step_refusal
from raftflow.transports.db.flow import Flow, Request, Response, Result, Statement


def commit_request(commits: Sequence[Commit], now: float, expiry: float) -> Request:
    """Full commits through the ``execution_commits`` view, and the read of each outcome."""
    params = {"commits": commit_rows(commits, now, expiry)}
    return Request((STORE("commit", params), STORE("commit_outcome", params)), transaction=False)


def transaction_request(
    commits: Sequence[Commit], now: float, expiry: float
) -> tuple[Request, list[Commit | None]]:
    """The transactional request of a batch holding transaction steps, and which commit
    owns each statement (None: the batch's own statements -- the guards, the commits)."""
    tx = [c for c in commits if c.transactional]
    params = {"commits": transaction_batch(tx, now, expiry)}
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
    statements += lean_statements(lean, now)
    statements += commit_request(full, now, expiry).statements if full else ()
    statements.append(STORE("transaction_recorded", params))
    owners += [None] * (len(statements) - len(owners))
    return Request(tuple(statements), transaction=True), owners


def transaction_batch(commits: Sequence[Commit], now: float, expiry: float) -> str:
    rows = [dict(commit.row(now, expiry), lean=commit.lean) for commit in commits]
    return json.dumps(rows, separators=(",", ":"))


def abort_reason(statement: Statement, result: Result) -> tuple[str, bool]:
    """Why a transaction step's statement failed, and whether that is the step's own
    refusal (its outcome) rather than the database's failure."""
    if statement.name.endswith("transaction_rows"):
        expected = dict(statement.params)["expected"]
        return f"a write changed another number of rows than expect_rows={expected}", True
    error = result.error or ""
    return f"a write failed: {error}", is_step_refusal(error)


def commit_rows(commits: Sequence[Commit], now: float, expiry: float) -> str:
    return json.dumps([commit.row(now, expiry) for commit in commits], separators=(",", ":"))


def lean_statements(commits: Sequence[Commit], now: float) -> tuple[Statement, ...]:
    """The lean commits' INSERT (``lean_step`` for one), and (for several) the read of
    which applied."""
    if not commits:
        return ()
    rows = [{name: getattr(c, name) for name in LEAN_ROW_FIELDS} for c in commits]
    for row in rows:
        row["now"] = now
    if len(rows) == 1:  # named parameters: cheaper than json_each for one
        return (STORE("lean_step", rows[0]),)
    params = {"commits": json.dumps(rows, separators=(",", ":"))}
    return (STORE("lean_commit", params), STORE("lean_outcome", params))


def final_statements(commits: Sequence[Commit], now: float) -> tuple[Statement, ...]:
    """The lean final commits' three writes, and (for several) the read of which applied."""
    if not commits:
        return ()
    if len(commits) == 1:  # named parameters: cheaper than json_each for one
        row = commits[0].row(now, 0.0)
        params = {name: row[name] for name in FINAL_PARAMS}
        return (
            STORE("lean_final_unlinked" if commits[0].unlinked else "lean_final", params),
            STORE("lean_final_step", params),
            STORE("lean_final_ack", params),
        )
    batch = {"commits": commit_rows(commits, now, 0.0)}
    return (
        STORE("lean_finals", batch),
        STORE("lean_finals_steps", batch),
        STORE("lean_finals_ack", batch),
        STORE("final_outcome", batch),
    )


#: The parameters of a lone lean final commit's statements.
FINAL_PARAMS = (
    "execution_id", "lease_seq", "lease_token", "commit_id", "now", "worker_id", "status",
    "output", "error", "step_idx", "step_name", "step_kind", "step_status", "step_output",
    "step_error", "step_started_at", "step_attempts", "step_wake_at",
)  # fmt: skip


def final_outcomes(
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


def lean_outcomes(
    response: Response, commits: Sequence[Commit], outcomes: dict[str, CommitOutcome]
) -> list[Commit]:
    """Decide what the lean commits' response tells; return those it does not."""
    if response[0].error is not None:
        return list(commits)  # a statement error: each is read, then resent in full
    if len(commits) == 1:
        (commit,) = commits
        if response[0].rows_affected == 1:
            outcomes[commit.commit_id] = lean_applied(commit)
            return []
        return [commit]  # refused (lost, or a cancel waits) or an ambiguous retry
    rows = {row["position"]: row for row in response[1].dicts()}
    undecided = []
    for position, commit in enumerate(commits):
        row = rows.get(position) or {}
        if row.get("applied"):
            outcomes[commit.commit_id] = lean_applied(commit)
        else:
            undecided.append(commit)
    return undecided


def read_back(
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
    params = {"commits": commit_rows(undecided, now, expiry)}
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


def applied(commit: Commit) -> CommitOutcome:
    return CommitOutcome(True)


def lean_applied(commit: Commit) -> CommitOutcome:
    """The event stays leased as it was: same message, same deadline."""
    return CommitOutcome(True, next_seq=commit.lease_seq, next_expiry=None)


def full_outcomes(response: Response, count: int) -> list[CommitOutcome]:
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
