"""Every write that names a lease, checked against who held it when it was applied.

A commit (every encoding: the view and its trigger, the lean statements, continue, the
transaction fence), a queue operation on a leased message (ack, nack, extend, release) and
a schedule's fire each name the lease they act under: a message and a token. The simulated
cluster asks this audit, before it applies a write request, which of those leases are *not*
held (the message is not leased to that token: the worker's lease lapsed and another took
it, or the message is gone), and takes a fingerprint of what such a statement could change
-- its execution's outcome and records, its group's messages, the executions its schedule
started. After the request, a fingerprint that changed is a stale worker's write applied:
``stale write: ...`` (tests/sim/verdicts.py, kind ``stale-write``).

A group that a held lease of the same request also writes is left out (a worker's stale
activation and its fresh one may commit the same execution in one batch): what changed
could be the fresh one's; so is a group a publish of the same request writes (a split
pair's relay). What other executions' writes may change in a group -- a parked
message's wake time (a signal, a child's outcome), a cancel or a limit's admission -- is
left out of the fingerprint, so the check never blames a stale statement for them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from raftflow.transports.db.flow import Request, Statement

#: A schedule's queue group: "raftflow:schedule:<workflow>" (engine/schedules.py).
SCHEDULE_GROUP = "raftflow:schedule:"


@dataclass(frozen=True)
class Lease:
    statement: str  # its catalogue name
    seq: int | None
    token: str
    group: str | None  # the execution (or schedule group) it names, if it says


@dataclass
class Suspect:
    lease: Lease
    group: str
    holder: str | None  # who holds the message now (None: free, or gone)
    before: Any


def leases(statement: Statement) -> list[Lease]:
    """The leases a write statement acts under, read from its parameters."""
    params = statement.params
    if not isinstance(params, dict) or statement.sql.lstrip()[:6].upper() == "SELECT":
        return []
    name = statement.name
    if name == "split.mirror":  # a lease being copied into a split pair's store, not used
        return []
    if "commits" in params:
        found = []
        for commit in json.loads(params["commits"]):
            if "lease_token" in commit:
                found.append(
                    Lease(name, commit["lease_seq"], commit["lease_token"], commit["execution_id"])
                )
        return found
    if "lease_seq" in params and "lease_token" in params:  # a commit, or a child's note
        group = params.get("execution_id", params.get("parent_id"))
        return [Lease(name, params["lease_seq"], params["lease_token"], group)]
    if "seq" in params and "token" in params:
        return [Lease(name, params["seq"], params["token"], None)]
    if "group_id" in params and "token" in params:
        return [Lease(name, None, params["token"], params["group_id"])]
    return []


#: What a fingerprint holds, in order (the message names what changed).
PARTS = ("outcome", "records", "messages", "signals taken", "schedule's starts", "rows of ")


def _short(token: str) -> str:
    """A lease token as the trace can tell them apart: its worker and 4 hex digits."""
    worker, _, rest = token.partition(":")
    return f"{worker}:{rest[:4]}" if rest else worker


class WriteAudit:
    """The checks of one simulated cluster's database (its ``main`` connection).

    ``tables``: the workload's own tables (a transaction step's writes), each with the
    column naming the execution a row belongs to -- in the fingerprint too."""

    def __init__(self, db: sqlite3.Connection, tables: tuple[tuple[str, str], ...] = ()) -> None:
        self.db = db
        self.tables = tables

    def before(self, request: Request) -> list[Suspect]:
        held: set[str] = set()
        suspects: list[Suspect] = []
        for statement in request.statements:
            for lease in leases(statement):
                group, holder = self._holder(lease)
                if group is None:
                    continue  # a message gone, named by nothing else: nothing to write
                if holder == lease.token:
                    held.add(group)
                else:
                    suspects.append(Suspect(lease, group, holder, None))
        # A split pair's relay publishes in the request that acks its ended turns
        # (stores/split.py): what a publish adds to a group is no stale write of an ack.
        held.update(
            str(s.params["group_id"])
            for s in request.statements
            if s.name == "queue.publish" and isinstance(s.params, dict)
        )
        suspects = [s for s in suspects if s.group not in held]
        for suspect in suspects:
            suspect.before = self.fingerprint(suspect.group)
        return suspects

    def after(self, suspects: list[Suspect]) -> list[str]:
        problems = []
        by_group: dict[str, list[Suspect]] = {}
        for suspect in suspects:
            by_group.setdefault(suspect.group, []).append(suspect)
        for group, found in by_group.items():
            now = self.fingerprint(group)
            before = found[0].before
            changed = [self.part(i) for i, (a, b) in enumerate(zip(before, now)) if a != b]
            if not changed:
                continue
            lease = found[0].lease
            names = ", ".join(dict.fromkeys(s.lease.statement for s in found))
            holder = found[0].holder
            if lease.seq is None:
                under = f"its lease of {group} (held by none of its messages)"
            elif holder is None:
                under = f"message {lease.seq} (free or gone)"
            elif holder == "__parked__":
                under = f"message {lease.seq} (parked)"
            else:
                under = f"message {lease.seq} (leased to {_short(holder)})"
            problems.append(
                f"stale write: {names} of {_short(lease.token)} under {under} changed "
                f"{group}'s {', '.join(changed)}"
            )
        return problems

    def _holder(self, lease: Lease) -> tuple[str | None, str | None]:
        if lease.seq is None:  # a whole group's release: held if any message of it is
            row = self.db.execute(
                "SELECT locked_by FROM messages WHERE group_id = ? AND locked_by = ?",
                (lease.group, lease.token),
            ).fetchone()
            return lease.group, row[0] if row else None
        row = self.db.execute(
            "SELECT group_id, locked_by FROM messages WHERE seq = ?", (lease.seq,)
        ).fetchone()
        if row is None:
            return lease.group, None
        return row[0], row[1]

    def fingerprint(self, group: str) -> Any:
        db = self.db
        execution = db.execute(
            "SELECT status, output, error, commit_id, run, input FROM executions WHERE id = ?",
            (group,),
        ).fetchall()
        steps = db.execute(
            "SELECT * FROM steps WHERE execution_id = ? ORDER BY idx", (group,)
        ).fetchall()
        messages = db.execute(
            "SELECT seq, locked_by, event, CASE WHEN locked_by = '__parked__' THEN NULL "
            "ELSE lock_expiry END FROM messages WHERE group_id = ? ORDER BY seq",
            (group,),
        ).fetchall()
        consumed = db.execute(
            "SELECT seq, consumed_idx FROM signals WHERE execution_id = ? ORDER BY seq", (group,)
        ).fetchall()
        started: list[Any] = []
        if group.startswith(SCHEDULE_GROUP):
            workflow = group[len(SCHEDULE_GROUP) :]
            started = db.execute(
                "SELECT id FROM executions WHERE id > ? AND id < ? ORDER BY id",
                (workflow + "@", workflow + "A"),
            ).fetchall()
        own = [
            db.execute(f'SELECT * FROM "{table}" WHERE "{column}" = ?', (group,)).fetchall()
            for table, column in self.tables
        ]
        return (execution, steps, messages, consumed, started, *own)

    def part(self, index: int) -> str:
        if index < len(PARTS) - 1:
            return PARTS[index]
        return PARTS[-1] + self.tables[index - len(PARTS) + 1][0]
