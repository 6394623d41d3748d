"""What a mutation of the simulated system is: a rewrite of the SQL the simulated cluster
receives, a change to its schema for one run, or a patch of a function for one run.

The planted bugs (tests/sim/mutations.py) and the fence removals (tests/sim/fences.py) are
both :class:`Mutation` objects; the simulator (tests/sim/sim.py) applies whichever one a
run names. A mutation also says which violations count as catching it (``expects``: the
kinds of :func:`tests.sim.verdicts.kind`); ``None`` means any violation does.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any


@dataclass
class Mutation:
    name: str

    #: The kinds of violation that count as catching it; None: any violation.
    expects: frozenset[str] | None = None
    #: One line for the tables: what is removed or changed.
    clause: str = ""

    def rewrite(self, sql: str) -> str:
        return sql

    def patch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def schema(self, cluster: Any) -> contextlib.AbstractContextManager[None]:
        """The simulated cluster's schema changed for one run (its databases restored after)."""
        return contextlib.nullcontext()

    def on_worker(self, worker: Any) -> None:
        return None
