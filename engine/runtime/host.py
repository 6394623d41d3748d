"""What a worker gives the runs it hosts: commits, the clock, the turn's length, the store.

:class:`RunHost` is the :class:`~raftflow.engine.workflow.host.Host` of every
activation of one worker run: the workflow core asks it, and only it, for what lies outside
the replay -- sending a commit (through the group committer), running a store flow, reading
the cluster's clock, deciding whether a run keeps its turn for one more step.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from raftflow.engine.runtime.committer import Committer
from raftflow.engine.runtime.hooks import HookChain
from raftflow.engine.runtime.local import LocalWorkers
from raftflow.engine.workflow.registry import Registry
from raftflow.engine.workflow.steppath import SHORT_WAIT
from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.contract import AsyncStore
from raftflow.stores.flows import StoreFlows
from raftflow.stores.records import ErrorInfo, Status
from raftflow.transports.contract import AsyncTransport
from raftflow.transports.db.clock import earliest_estimate, is_virtual, uncertainty_of
from raftflow.transports.db.flow import Flow
from raftflow.transports.payload import from_json

if TYPE_CHECKING:
    from raftflow.engine.runtime.lanes import ServedLanes
    from raftflow.engine.runtime.worker import WorkerOptions, WorkerStats

log = logging.getLogger("raftflow.worker")

T = TypeVar("T")

#: How long a read of whether other executions wait to be claimed is taken as current
#: (keep_turn), and past what age it no longer counts at all: one weak read (no Raft entry)
#: per WAITING_TTL at most, and only while turns reach ``steps_per_turn``.
WAITING_TTL = 0.1
WAITING_STALE = 1.0


@dataclass(frozen=True)
class WorkerContext:
    """Who the worker is and how it runs: what every part of its run reads."""

    worker_id: str
    options: WorkerOptions
    stats: WorkerStats
    hooks: HookChain


@dataclass(frozen=True)
class Definitions:
    """What the engine defines that a worker runs: its registry and its limits."""

    registry: Registry
    max_payload_bytes: int
    max_history: int


class RunHost:
    """The activations' host for one worker run (its event loop's side)."""

    def __init__(
        self,
        worker: WorkerContext,
        *,
        definitions: Definitions,
        transport: AsyncTransport,
        store: AsyncStore,
        local: LocalWorkers,
        lanes: ServedLanes,
        stopping: asyncio.Event,
        running: Callable[[], int],
        elsewhere: Callable[[str], AsyncStore | None] = lambda _id: None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.worker_id = worker.worker_id
        self.options = options = worker.options
        self.stats = stats = worker.stats
        self.hooks = hooks = worker.hooks
        self.registry = definitions.registry
        self.max_payload_bytes = definitions.max_payload_bytes
        self.max_history = definitions.max_history
        self.transport = transport
        self.store = store
        #: The store's flows, which the workflow core builds for its durable calls.
        self.flows: StoreFlows = store.flows
        self.local = local
        self.lanes = lanes
        self.stopping = stopping
        #: Sharded: the store of another cluster that holds an execution (None: this one).
        self.elsewhere = elsewhere
        #: Tell the relay (engine/runtime/relay.py) that the outbox has news.
        self.news: Callable[[], None] = lambda: None
        self.committer = Committer(store, options, stats, hooks, alone=lambda: running() <= 1)
        # Whether another group waited to be claimed, and when that was read (keep_turn).
        self._waiting: tuple[float, bool] | None = None
        self.waiting_read: asyncio.Task[None] | None = None

    # -- commits and flows ----------------------------------------------------------------

    async def commit(self, commit: Commit) -> CommitOutcome:
        local = self.local
        final = commit.status is not None and commit.status.is_final
        # An outcome this process's result() may be waiting for (runtime/local.py): the
        # ticket orders the commit's sending after the waiters already there.
        sent = (
            local.ticket()
            if final and commit.continue_input is None and local.holds(commit.execution_id)
            else None
        )
        outcome = await self.committer.commit(commit)
        if outcome.applied:
            self.stats.commits += 1
            self.stats.steps += commit.step_idx is not None
            self.stats.executions_finished += final
            if sent is not None:
                _hand_over(local, commit, sent)
        else:
            self.stats.fenced += 1
        return outcome

    async def run_flow(self, flow: Flow[T], route: str | None = None) -> T:
        store = None if route is None else self.elsewhere(route)
        return await (store or self.store).run(flow)

    def holds_here(self, execution_id: str) -> bool:
        return self.elsewhere(execution_id) is None

    def same_cluster(self, one: str, other: str) -> bool:
        return self.elsewhere(one) is self.elsewhere(other)

    def finished(self, execution_id: str, status: Status, parent_id: str | None = None) -> None:
        """An execution's outcome committed here: tell the hooks and local result() waiters,
        and the relay when it is news for another cluster (a parent there, or a cancel,
        which cancels children there)."""
        self.hooks.after_execution(execution_id, status)
        self.local.finished(execution_id)
        if status is Status.CANCELLED or (parent_id is not None and not self.holds_here(parent_id)):
            self.news()

    # -- the clock ------------------------------------------------------------------------

    def clock_estimate(self) -> float:
        return self.store.clock.estimate()

    def clock_uncertainty(self) -> float:
        return uncertainty_of(self.store.clock)

    def clock_earliest(self) -> float:
        return earliest_estimate(self.store.clock)

    def short_wait(self) -> float:
        # Under a virtual clock (engine.testing) time moves only when the test moves it:
        # every wait parks, however short, so that it ends when the clock says so.
        return 0.0 if is_virtual(self.store.clock) else SHORT_WAIT

    @property
    def sticky(self) -> bool:
        return self.options.sticky_cache > 0

    # -- turns ----------------------------------------------------------------------------

    def keep_turn(self, turn_steps: int) -> bool:
        """Whether a run goes on with its next step in this turn (called from the thread
        that runs it, with the steps it committed since its claim). After
        ``steps_per_turn`` steps it is handed back only if another execution waits to be
        claimed: fairness needs the slot then, and otherwise a hand-back buys nothing and
        costs a claim (a Raft entry, and a wait)."""
        if self.stopping.is_set():
            return False
        if turn_steps + 1 < self.options.steps_per_turn:
            return True
        return not self.options.yield_idle_turns and not self._others_wait()

    def _others_wait(self) -> bool:
        """Whether some group waits to be claimed, as last read; older than WAITING_TTL
        it is read again meanwhile, and unknown (or older than WAITING_STALE) counts as
        no. Not as yes: a read taken just after a hand-back finds the handed-back group
        itself waiting, and every turn would end again (the step after the read decides)."""
        seen, now = self._waiting, self.loop.time()
        if seen is None or now - seen[0] > WAITING_TTL:
            self.loop.call_soon_threadsafe(self._read_waiting)
        return seen is not None and now - seen[0] <= WAITING_STALE and seen[1]

    def _read_waiting(self) -> None:
        if self.waiting_read is None or self.waiting_read.done():
            self.waiting_read = self.loop.create_task(self._read_waiting_now())

    async def _read_waiting_now(self) -> None:
        try:
            ready = await self.transport.claimable(
                self.options.min_priority, lanes=self.lanes.current
            )
        except Exception as exc:  # unknown (a claim would fail too: nobody is kept out)
            log.debug("worker %s: reading the claimable groups failed: %s", self.worker_id, exc)
            self._waiting = None
        else:
            self._waiting = (self.loop.time(), bool(ready))


def _hand_over(local: LocalWorkers, commit: Commit, sent: int) -> None:
    """The applied commit of an outcome, to this process's result() waiters."""
    assert commit.status is not None
    if commit.status is Status.SUCCEEDED and commit.output is not None:
        local.settled(commit.execution_id, sent, commit.status, from_json(commit.output), None)
    elif commit.status is not Status.SUCCEEDED and commit.error is not None:
        error = ErrorInfo.from_json(from_json(commit.error))
        local.settled(commit.execution_id, sent, commit.status, None, error)
    # else: the stored output or error is an earlier commit's (COALESCE): read it
