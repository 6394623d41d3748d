"""What the workers running in this process offer the rest of it.

Two shortcuts, both invisible from other processes (which see the same effects through
the database, a poll later):

- **A slot for an execution started here.** ``engine.start()`` in a process running a
  worker with a free slot publishes the first event already leased to that worker and hands
  it over in memory: no poll, no claim (one Raft entry less, and no poll interval).
- **The news of a finished execution.** ``handle.result()`` waits on it between its polls,
  so a result computed in this process is seen at once, and with its outcome: the worker
  keeps the last outcomes it committed (a bounded few, small ones only), so that
  ``result()`` returns without reading it back (one request less).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raftflow.stores.base import Status

if TYPE_CHECKING:
    from raftflow.engine.session import Session

#: How many committed outcomes a process keeps for its result() waiters, and how large one
#: may be (output or error JSON text); a larger one only wakes them, and they read it.
KEPT_OUTCOMES = 256
KEPT_OUTCOME_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class Outcome:
    """A final status committed by a worker of this process, as stored."""

    workflow: str | None  # None where the worker did not know it (a cancel of its event)
    status: Status
    output: str | None  # JSON text
    error: str | None  # JSON text


class LocalWorkers:
    """The sessions of the workers running in this process, for one engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: list[Session] = []
        self._finished = threading.Condition()
        # An outcome with the generation it was committed at: a waiter takes it only if it
        # is newer than what it read (a resumed execution finishes again, maybe elsewhere).
        self._outcomes: OrderedDict[str, tuple[int, Outcome]] = OrderedDict()
        self._generation = 0  # counts finishes: a waiter compares it to what it read before

    def add(self, session: Session) -> None:
        with self._lock:
            self._sessions.append(session)

    def remove(self, session: Session) -> None:
        with self._lock:
            self._sessions.remove(session)

    def reserve(self, priority: int) -> Session | None:
        """A local worker that took a slot for an execution of ``priority``, or None."""
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            if session.reserve(priority):
                return session
        return None

    def finished(self, execution_id: str, outcome: Outcome) -> None:
        """An execution's outcome committed in this process: keep it, wake the waiters."""
        with self._finished:
            self._generation += 1
            if len(outcome.output or "") + len(outcome.error or "") <= KEPT_OUTCOME_CHARS:
                self._outcomes[execution_id] = (self._generation, outcome)
                self._outcomes.move_to_end(execution_id)
                while len(self._outcomes) > KEPT_OUTCOMES:
                    self._outcomes.popitem(last=False)
            self._finished.notify_all()

    @property
    def generation(self) -> int:
        """Taken before reading an execution, so that a finish during the read is seen."""
        return self._generation

    def wait(self, execution_id: str, since: int, timeout: float) -> Outcome | None:
        """Wait up to ``timeout`` seconds for something to finish in this process after
        generation ``since``; the outcome of ``execution_id`` if it committed since."""

        def newer() -> Outcome | None:
            kept = self._outcomes.get(execution_id)
            return kept[1] if kept is not None and kept[0] > since else None

        with self._finished:
            self._finished.wait_for(
                lambda: newer() is not None or self._generation != since, timeout
            )
            return newer()
