"""What the workers running in this process offer the rest of it.

Two shortcuts, both invisible from other processes (which see the same effects through
the database, a poll later):

- **A slot for an execution started here.** ``engine.start()`` in a process running a
  worker with a free slot publishes the first event already leased to that worker and hands
  it over in memory: no poll, no claim (one Raft entry less, and no poll interval).
- **An execution run here from its start.** While the worker it was handed to runs it,
  ``handle.result()`` does not read it (what it would read is "running"): it waits for
  the worker's news, then reads once.
- **The news of a finished execution.** ``handle.result()`` waits on it between its polls,
  so a result computed in this process is seen at once (one read of it after the news: a
  result kept in memory could be older than what the waiter read -- an execution resumed
  since -- and telling them apart is not worth a read).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raftflow.engine.session import Session


class LocalWorkers:
    """The sessions of the workers running in this process, for one engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: list[Session] = []
        self._finished = threading.Condition()
        self._generation = 0  # counts finishes: a waiter compares it to what it read before
        self._held: dict[str, int] = {}  # executions a local worker was handed at their start

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

    def finished(self) -> None:
        """An execution finished in this process: wake the result() waiters."""
        with self._finished:
            self._generation += 1
            self._finished.notify_all()

    def hold(self, execution_id: str) -> None:
        """A local worker was handed this execution (the start fast path): until
        :meth:`release`, its outcome can only come from that worker, which announces it."""
        with self._finished:
            self._held[execution_id] = self._held.get(execution_id, 0) + 1

    def release(self, execution_id: str) -> None:
        """The local worker's turn of the execution is over (finished or not): wake the
        waiters, which read it again."""
        with self._finished:
            left = self._held.get(execution_id, 0) - 1
            if left > 0:
                self._held[execution_id] = left
            else:
                self._held.pop(execution_id, None)
            self._generation += 1
            self._finished.notify_all()

    def holds(self, execution_id: str) -> bool:
        """Whether a local worker is running the execution it was handed at its start."""
        with self._finished:
            return execution_id in self._held

    @property
    def generation(self) -> int:
        """Taken before reading an execution, so that a finish during the read is seen."""
        return self._generation

    def wait(self, since: int, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for an execution to finish in this process after
        generation ``since`` (at once if one has already)."""
        with self._finished:
            self._finished.wait_for(lambda: self._generation != since, timeout)
