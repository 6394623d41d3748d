"""What kind of violation a simulator finding is, and whether it catches a mutation.

A fence removed on purpose (tests/sim/fences.py) counts as caught only by the violation it
allows -- a stale worker's write applied, two leases on one group, a limit exceeded, a
transaction's writes applied twice -- not by a symptom such as an execution left stuck.
The kinds are read from the messages of the checks (tests/sim/invariants.py,
tests/sim/invariants_more.py, tests/sim/cluster.py, tests/sim/audit.py): a check whose
wording changes must keep its kind here (a fence's recorded catch would no longer count,
and ``python -m tests.sim --mutation-check`` fails).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tests.sim.mutation import Mutation

#: kind: what a violation's message looks like (the first that matches decides).
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("stale-write", re.compile(r"^stale write: ")),
    ("double-lease", re.compile(r"live leases at once|took over the lease of ")),
    ("limit-exceeded", re.compile(r"^limit \S+: ")),
    ("applied-twice", re.compile(r": deposit applied \d+ times")),
    ("unrecorded", re.compile(r": deposit applied, its step not recorded")),
    ("slot", re.compile(r"^schedule\b")),
    ("served", re.compile(r"^w\d+ \(serving \[")),
    ("stuck", re.compile(r": (child )?stuck \(")),
)


def kind(violation: str) -> str:
    for name, pattern in KINDS:
        if pattern.search(violation):
            return name
    return "other"


def catching(mutation: Mutation | None, violations: Sequence[str]) -> str | None:
    """The first violation that catches ``mutation`` (any one, if it expects no kind)."""
    for violation in violations:
        if mutation is None or mutation.expects is None or kind(violation) in mutation.expects:
            return violation
    return None
