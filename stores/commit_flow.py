"""The commit flow: a batch of executions' commits in one request, each atomic on its own.

The statements are :mod:`raftflow.stores.commit_sql`'s. A commit refused by its fence
(the lease lapsed: another worker holds the execution) is skipped alone; a statement error
that fails a whole batch is retried commit by commit, so only the culprit fails; an answer
that does not say whether a commit applied (a zero-row result, an ambiguous retry) is read
back by the commit's id at ``strong`` level, so no commit is ever applied twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.commit_sql import (
    abort_reason,
    applied,
    commit_request,
    final_outcomes,
    final_statements,
    full_outcomes,
    lean_applied,
    lean_outcomes,
    lean_statements,
    read_back,
    transaction_batch,
    transaction_request,
)
from raftflow.stores.flows import QUERIES as STORE
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request, Response, Statement

#: A batch's statements: its lean commits', its lean final ones', its full ones'.
Parts = tuple[tuple[Statement, ...], tuple[Statement, ...], tuple[Statement, ...]]


class CommitFlows:
    """Commits of many executions, sent together (group commit)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        #: Whether a commit may keep the next event leased to its worker (its turn goes
        #: on). Not on a split pair (stores/split.py): the next event must reach the
        #: transport first, so a lean commit sent again in full ends the turn.
        self.holds = True

    def _in_full(self, commit: Commit) -> Commit:
        """``commit`` sent as a full one (the view and its trigger)."""
        return replace(commit, full=True, next_token=commit.next_token if self.holds else None)

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
        now = yield from self.clock.now()
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
        parts = _parts(lean, finals, full, now, expiry)
        # A lean final commit is three statements: a transaction makes them one write.
        response = yield Request(parts[0] + parts[1] + parts[2], transaction=bool(finals))
        if finals and any(result.error is not None for result in response.results):
            # Rolled back as a whole (a failing read aside): the batch again, its final
            # commits full -- each commit id tells whether an earlier attempt applied.
            again = [replace(c, full=True) if c.lean_final else c for c in commits]
            return (yield from self.commit(again, visibility))
        return (
            yield from self._decide(commits, lean, full, response, 0, now, expiry, finals, parts)
        )

    def _decide(
        self,
        commits: Sequence[Commit],
        lean: Sequence[Commit],
        full: Sequence[Commit],
        response: Response,
        offset: int,
        now: float,
        expiry: float,
        finals: Sequence[Commit],
        parts: Parts,
    ) -> Flow[list[CommitOutcome]]:
        """The outcome of each commit from a batch's response (its lean statements from
        ``offset``, then its lean final ones, then its full ones: ``parts``), reading or
        resending what the response leaves open."""
        lean_part, final_part, full_part = parts
        results = response.results[offset:]
        response = Response(
            Request(lean_part + final_part + full_part, False), results, response.ambiguous
        )
        outcomes: dict[str, CommitOutcome] = {}
        resend: list[Commit] = []
        if finals:
            start, end = len(lean_part), len(lean_part) + len(final_part)
            part = Response(Request(final_part, False), results[start:end], response.ambiguous)
            undecided = final_outcomes(part, finals, outcomes)
            if undecided:  # rare: a stale lease, or an ambiguous attempt -- read what happened
                yield from read_back(
                    "final_outcome", undecided, applied, now, expiry, outcomes, resend
                )
            results = results[:start] + results[end:]
            response = Response(Request(lean_part + full_part, False), results, response.ambiguous)
        split = len(lean_part)
        if lean:
            part = Response(Request(lean_part, False), response.results[:split], response.ambiguous)
            undecided = lean_outcomes(part, lean, outcomes)
            if undecided:  # rare: zero rows, or an ambiguous attempt -- read what happened
                yield from read_back(
                    "lean_outcome", undecided, lean_applied, now, expiry, outcomes, resend
                )
        if full:
            part = Response(Request(full_part, False), response.results[split:], response.ambiguous)
            if part[0].error is not None and len(full) > 1:
                resend += full
            else:
                outcomes.update(zip((c.commit_id for c in full), full_outcomes(part, len(full))))
        for commit in resend:  # one by one: a statement error fails only its own commit
            single = yield commit_request([self._in_full(commit)], now, expiry)
            outcomes[commit.commit_id] = full_outcomes(single, 1)[0]
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
            parts = _parts(lean, (), full, now, expiry)
            return (
                yield from self._decide(
                    commits, lean, full, response, offset, now, expiry, (), parts
                )
            )
        outcomes: dict[str, CommitOutcome] = {}
        culprit = owners[failed] if failed < len(owners) else None
        if culprit is not None and not response.ambiguous:
            reason, refused = abort_reason(request.statements[failed], response.results[failed])
            outcomes[culprit.commit_id] = (
                CommitOutcome(False, error=reason, aborted=reason)
                if refused
                else CommitOutcome(False, error=reason, failed=reason)
            )
            rest = [c for c in commits if c is not culprit]
            if rest:
                outcomes.update(
                    zip((c.commit_id for c in rest), (yield from self.commit(rest, visibility)))
                )
            return [outcomes[c.commit_id] for c in commits]
        tx = [c for c in commits if c.transactional]
        plain = [c for c in commits if not c.transactional]
        check = yield Request(
            (STORE("transaction_outcome", {"commits": transaction_batch(tx, now, expiry)}),),
            level="strong",
        )
        rows = {r["position"]: r for r in check.raise_for_errors()[0].dicts()}
        again: list[Commit] = []
        for position, commit in enumerate(tx):
            row = rows.get(position) or {}
            if row.get("applied"):
                outcomes[commit.commit_id] = (
                    lean_applied(commit)
                    if commit.lean
                    else CommitOutcome(
                        True, next_seq=row["next_seq"], next_expiry=row["next_expiry"]
                    )
                )
            elif row.get("held") and not (commit.full and len(commits) == 1):
                again.append(self._in_full(commit))
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
        now = yield from self.clock.now()
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


def _parts(  # built once: _decide reads the response by them
    lean: Sequence[Commit],
    finals: Sequence[Commit],
    full: Sequence[Commit],
    now: float,
    expiry: float,
) -> Parts:
    full_part = commit_request(full, now, expiry).statements if full else ()
    return lean_statements(lean, now), final_statements(finals, now), full_part
