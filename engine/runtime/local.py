"""What the workers running in this process offer the rest of it.

Shortcuts, all invisible from other processes (which see the same effects through the
database, a poll later):

- **A slot for an execution started here.** ``engine.start()`` in a process running a
  worker with a free slot publishes the first event already leased to that worker and hands
  it over in memory: no poll, no claim (one Raft entry less, and no poll interval).
- **An execution run here from its start.** While the worker it was handed to runs it,
  ``handle.result()`` does not read it (what it would read is "running"): it waits for
  the worker's news.
- **Its outcome, handed over.** The worker keeps the outcome it committed; once its turn
  is over, a ``result()`` that was already waiting takes it from memory: no read. Only a
  waiter whose call began before the commit was sent (a ticket from the same counter):
  the outcome was then the execution's state at an instant within the call, the commit's.
  A waiter that came later reads, since the execution may have changed since (resumed,
  forked): a kept outcome could be older than what it would read.
- **The news of a finished execution.** ``handle.result()`` waits on it between its polls,
  so a result computed in this process is seen at once (one read of it after the news).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from raftflow.stores.records import ErrorInfo, Status

if TYPE_CHECKING:
    from raftflow.stores.records import Claimed


class LocalSlots(Protocol):
    """A worker run of this process, as the start fast path uses it."""

    @property
    def worker_id(self) -> str: ...

    @property
    def shard(self) -> str:
        """The name of the cluster it claims from ("" unsharded)."""
        ...

    @property
    def visibility(self) -> float:
        """Its lease length: the first event's lease lasts that long."""
        ...

    def reserve(self, priority: int, lane: str) -> bool:
        """Take a free slot for an execution of ``priority`` in ``lane`` (thread-safe)."""
        ...

    def unreserve(self) -> None: ...

    def adopt(self, claimed: Claimed) -> None:
        """Run the execution whose first event was published leased to it (thread-safe)."""
        ...


#: Outcomes kept for waiters (the most recent; one is taken at most a moment after it is
#: kept, by a waiter already there).
KEPT_OUTCOMES = 256


@dataclass(frozen=True, slots=True)
class KeptOutcome:
    """An execution's outcome as its worker committed it, and when that commit was sent."""

    workflow: str
    status: Status
    output: Any
    error: ErrorInfo | None
    sent: int  # the counter's value just before the commit was sent


@dataclass(slots=True)
class _Watch:
    """The result() waiters of one execution: how many, and the news they wait for."""

    condition: threading.Condition
    waiters: int = 0
    news: int = 0


class LocalWorkers:
    """The worker runs of this process, for one engine."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: list[LocalSlots] = []
        self._finished = threading.Lock()
        # News per watched execution: a waiter compares its count to what it read before,
        # and only the waiters of that execution wake. (One condition for all would wake
        # every result() thread of the process at every finish, each taking the GIL from
        # the worker's loop.)
        self._watched: dict[str, _Watch] = {}
        self._held: dict[str, int] = {}  # executions a local worker was handed at their start
        self._workflows: dict[str, str] = {}  # ... and their workflows
        self._outcomes: OrderedDict[str, KeptOutcome] = OrderedDict()
        self._counter = itertools.count(1)  # orders waiters' calls and commits' sending

    def add(self, run: LocalSlots) -> None:
        with self._lock:
            self._runs.append(run)

    def remove(self, run: LocalSlots) -> None:
        with self._lock:
            self._runs.remove(run)

    def reserve(self, priority: int, lane: str, shard: str = "") -> LocalSlots | None:
        """A local worker of cluster ``shard`` that took a slot for an execution of
        ``priority`` in ``lane`` (one that serves it), or None."""
        with self._lock:
            runs = list(self._runs)
        for run in runs:
            if run.shard == shard and run.reserve(priority, lane):
                return run
        return None

    def finished(self, execution_id: str) -> None:
        """An execution finished in this process: wake its result() waiters -- unless a
        local worker still holds it (:meth:`hold`): they wait for the end of that turn,
        which :meth:`release` tells. Woken now, they would find it held and wait again,
        and the wake-up (a thread switch) would delay the worker finishing its turn."""
        with self._finished:
            if execution_id not in self._held:
                self._tell(execution_id)

    def _tell(self, execution_id: str) -> None:
        watch = self._watched.get(execution_id)  # called with the lock held
        if watch is not None:
            watch.news += 1
            watch.condition.notify_all()

    def hold(self, execution_id: str, workflow: str | None) -> None:
        """A local worker was handed this execution (the start fast path): until
        :meth:`release`, its outcome can only come from that worker, which announces it."""
        with self._finished:
            self._held[execution_id] = self._held.get(execution_id, 0) + 1
            if workflow is not None:
                self._workflows[execution_id] = workflow

    def release(self, execution_id: str) -> None:
        """The local worker's turn of the execution is over (finished or not): wake the
        waiters, which read it again."""
        with self._finished:
            left = self._held.get(execution_id, 0) - 1
            if left > 0:
                self._held[execution_id] = left
            else:
                self._held.pop(execution_id, None)
                self._workflows.pop(execution_id, None)
            self._tell(execution_id)

    def holds(self, execution_id: str) -> bool:
        """Whether a local worker is running the execution it was handed at its start."""
        with self._finished:
            return execution_id in self._held

    def ticket(self) -> int:
        """Taken by a waiter when its call begins, and by a worker just before it sends an
        outcome's commit: which came first."""
        with self._finished:
            return next(self._counter)

    def settled(
        self,
        execution_id: str,
        sent: int,
        status: Status,
        output: Any,
        error: ErrorInfo | None,
    ) -> None:
        """A local worker's commit of a held execution's outcome applied (sent at ticket
        ``sent``): keep it for the waiters already there."""
        with self._finished:
            workflow = self._workflows.get(execution_id)
            if workflow is None:
                return
            self._outcomes[execution_id] = KeptOutcome(workflow, status, output, error, sent)
            self._outcomes.move_to_end(execution_id)
            while len(self._outcomes) > KEPT_OUTCOMES:
                self._outcomes.popitem(last=False)
            # Taken once the worker's turn is over (release): a client that starts its
            # next execution at once then finds the slot free again (the start fast path)
            # rather than a worker still finishing this one.

    def outcome(self, execution_id: str, ticket: int) -> KeptOutcome | None:
        """The outcome a worker here committed after the waiter holding ``ticket`` began
        waiting, if any."""
        with self._finished:
            kept = self._outcomes.get(execution_id)
            return kept if kept is not None and kept.sent > ticket else None

    def watch(self, execution_id: str) -> None:
        """A result() call begins waiting for the news of ``execution_id`` (until
        :meth:`unwatch`)."""
        with self._finished:
            watch = self._watched.get(execution_id)
            if watch is None:
                watch = self._watched[execution_id] = _Watch(threading.Condition(self._finished))
            watch.waiters += 1

    def unwatch(self, execution_id: str) -> None:
        with self._finished:
            watch = self._watched[execution_id]
            watch.waiters -= 1
            if not watch.waiters:
                del self._watched[execution_id]

    def news(self, execution_id: str) -> int:
        """Taken before reading a watched execution, so that news during the read is seen."""
        with self._finished:
            return self._watched[execution_id].news

    def wait(self, execution_id: str, since: int, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for news of the watched ``execution_id`` after
        count ``since`` (at once if there is already)."""
        with self._finished:
            watch = self._watched[execution_id]
            watch.condition.wait_for(lambda: watch.news != since, timeout)
