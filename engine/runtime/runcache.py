"""The run cache: runs suspended between their turns, kept in memory to be resumed.

When a worker claims an execution again and the claim's read-back shows nothing changed
since its last turn here (the last full commit and the last recorded call: the run's
fingerprint), the kept run resumes where it stopped -- no history read, no replay. Least
recently used out first, and fewer while the process's resident memory is above a bound.
"""

from __future__ import annotations

import os
from collections import OrderedDict

from raftflow.engine.workflow.activation import Activation


def resident_mb() -> float:
    """This process's resident memory in MiB (Linux; 0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


class RunCache:
    """Suspended runs by execution id (on the worker's loop)."""

    def __init__(self, size: int, limit_mb: float | None) -> None:
        self.size = size
        self.limit_mb = limit_mb
        self.runs: OrderedDict[str, Activation] = OrderedDict()

    def __len__(self) -> int:
        return len(self.runs)

    def fingerprints(self) -> dict[str, tuple[str | None, int]]:
        """What each kept run expects its execution's row to say (the claim compares)."""
        return {execution_id: run.fingerprint() for execution_id, run in self.runs.items()}

    def take(self, execution_id: str) -> Activation | None:
        return self.runs.pop(execution_id, None)

    def keep(self, run: Activation) -> None:
        """Keep a suspended run, least recently used out first (its run then unwinds)."""
        # A run whose thread suspended late (after the worker claimed its next event and
        # started a replay of it) may find that replay kept under its id: the one put
        # aside unwinds, or its thread would wait forever.
        displaced = self.runs.pop(run.execution_id, None)
        if displaced is not None and displaced is not run:
            displaced.discard()
        self.runs[run.execution_id] = run
        while len(self.runs) > self.size or (
            self.limit_mb is not None and self.runs and resident_mb() > self.limit_mb
        ):
            _, oldest = self.runs.popitem(last=False)
            oldest.discard()

    def clear(self) -> None:
        """Give up every kept run (the worker stops): each unwinds."""
        for run in self.runs.values():
            run.discard()
        self.runs.clear()
