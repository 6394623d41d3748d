"""One run of an execution's workflow code by a worker that holds its lease.

The workflow function runs from the start. A step call whose result is recorded returns
that result (or raises its recorded error) without running the step: the code between
steps is replayed and sees the same values. The first unrecorded step runs, and its
outcome is staged here and committed -- before the next step runs, or with the
workflow's outcome if it returns first -- together with the ack of the current event and
the publish of the next (:class:`~raftflow.stores.commit.Commit`, one fenced statement).
While the worker keeps the turn the next event stays leased to it, so the workflow simply
continues in memory; when the turn ends (or another event of the execution is waiting)
the next event goes back to the queue and the next step call unwinds the run: the next
claimer replays up to there. :mod:`raftflow.engine.workflow.steppath` is that path as a flow.

Who changes what: the worker's event loop owns the lease (``lease``, ``held``,
``turn_steps``, ``committing``); the thread or task running the workflow code owns the
replay (``next_index``, ``staged``, ``in_step``). Each side only reads the other's.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic
from raftflow.engine.workflow.callorder import CallOrder
from raftflow.engine.workflow.context import runs_here
from raftflow.engine.workflow.divergence import Divergence, check_call
from raftflow.engine.workflow.handoff import run_on_loop
from raftflow.engine.workflow.host import Host
from raftflow.engine.workflow.registry import StepDef, WorkflowDef
from raftflow.engine.workflow.staging import Staged, Staging
from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.records import Claimed, ErrorInfo, Signal, StepRecord

from raftflow.errors import (
    HistoryLimitError,
    InputValidationError,
    NonDeterminismError,
    RaftflowError,
    StepError,
    WorkflowError,
)

if TYPE_CHECKING:
    pass

T = TypeVar("T")

log = logging.getLogger("raftflow.worker")


class ContinueAsNew(BaseException):
    """Raised by ``engine.continue_as_new``: this run ends, the next starts with
    ``input_json``. A BaseException: a workflow's ``except Exception`` cannot swallow it."""

    def __init__(self, input_json: str) -> None:
        super().__init__("continue as new")
        self.input_json = input_json


class Unwind(BaseException):
    """Ends a workflow run early: this worker no longer holds (or gives up) the lease.

    A BaseException so that a workflow's ``except Exception`` cannot swallow it.
    """


class Activation(Staging):
    """The state of one run: the lease, the recorded calls and the position in them."""

    def __init__(self, host: Host, workflow: WorkflowDef, claimed: Claimed) -> None:
        assert claimed.execution is not None
        self.host = host
        self.workflow = workflow
        self.record = claimed.execution
        self.recorded = {step.idx: step for step in claimed.steps}
        self.last_index = max(self.recorded, default=-1)
        self.signals = {signal.seq: signal for signal in claimed.signals}  # unread
        self.children = dict(claimed.children)
        # The loop's side.
        self.lease = claimed.lease
        self.held = True  # this worker holds self.lease
        self.turn_steps = 0  # commits since the claim
        self.committing = False  # a commit is in flight: the heartbeat leaves it alone
        self.commits = 0
        # The workflow code's side.
        self.next_index = 0
        self.staged: Staged | None = None
        self.sent: Staged | None = None  # the staged call of the last commit sent
        self.in_step = False
        self.fatal: WorkflowError | None = None  # a NonDeterminismError user code cannot hide
        self.divergence: Divergence | None = None  # what made it one
        # An async workflow's concurrent calls, one at a time.
        self.calls = CallOrder(Unwind, lambda context: runs_here(context, self))
        #: Set when the run gave up for a reason outside user code: hand the lease back.
        self.failure: BaseException | None = None
        # Turns (sticky continuation): the worker awaits ``turn``, which the run resolves
        # with "suspended" when it waits for its next turn, or "done" when it ends.
        self.turn: asyncio.Future[str] | None = None
        self.commit_id: str | None = claimed.execution.commit_id  # the last full commit
        self._wake = threading.Event()  # a sync run waits on it while suspended
        self._awake: asyncio.Future[bool] | None = None  # an async run awaits it
        self._resumed = False

    @property
    def execution_id(self) -> str:
        return self.record.id

    @property
    def is_async(self) -> bool:
        return self.workflow.is_async

    def now(self) -> float:
        """The cluster's time, without I/O (deadlines and wake times are measured on it)."""
        return self.host.clock_estimate()

    def after(self, seconds: float, *, now: float | None = None) -> float:
        """A wake time (or deadline) ``seconds`` from now that is surely no earlier on the
        cluster's clock: the estimate plus its uncertainty. With :meth:`passed`, timers
        never fire early, however far either worker's estimate is off (found by tests/sim:
        a sleep set by a worker whose estimate was behind ended early by that much).
        ``now``: a reading of :meth:`now` already taken, to count from it."""
        return (self.now() if now is None else now) + self.host.clock_uncertainty() + seconds

    def passed(self, deadline: float) -> bool:
        """Whether ``deadline`` has surely passed on the cluster's clock."""
        return self.host.clock_earliest() >= deadline

    def remaining(self, deadline: float) -> float:
        """How long until ``deadline`` has surely passed (<= 0: it has)."""
        return deadline - self.host.clock_earliest()

    def args(self) -> tuple[Any, ...]:
        try:
            return self.workflow.call_args(self.record.input)
        except pydantic.ValidationError as exc:
            raise InputValidationError(
                f"stored input of {self.execution_id!r} no longer validates: {exc}"
            ) from None

    # -- replay ---------------------------------------------------------------------------

    def peek(self) -> StepRecord | None:
        """The record at the next call's position, without taking the position."""
        return self.recorded.get(self.next_index)

    def next_call(self, kind: str, name: str) -> tuple[int, StepRecord | None]:
        """The index of the workflow's next call, and its record if it has one. A record
        of another call than this one is a :class:`NonDeterminismError`."""
        if self.in_step:
            raise WorkflowError(
                f"execution {self.execution_id!r} called {kind} {name!r} while a step was "
                "running: the calls of one execution run one at a time (await each)"
            )
        index = self.next_index
        limit = self.host.max_history
        if index >= limit and index not in self.recorded:
            raise HistoryLimitError(
                f"execution {self.execution_id!r} reached its history limit of {limit} calls: "
                "end the run with engine.continue_as_new(...) before that (or raise "
                "Engine(max_history=...))"
            )
        if index == int(limit * 0.8) and index not in self.recorded:
            log.warning(
                "execution %s: %d calls recorded, 80%% of the history limit (%d); a loop "
                "that never ends should call engine.continue_as_new()",
                self.execution_id,
                index,
                limit,
            )
        self.next_index += 1
        record = self.recorded.get(index)
        divergence = check_call(index, record, kind, name)
        if divergence is not None:
            error = NonDeterminismError(f"execution {self.execution_id!r}: {divergence}")
            if self.divergence is None:  # the first: later ones (a gather's) follow from it
                self.divergence, self.fatal = divergence, error
            raise error
        return index, record

    def result(self, step: StepDef, record: StepRecord, cause: Exception | None = None) -> Any:
        """A step's value from its record, or :class:`StepError` (caused by the step's own
        exception when it ran in this run)."""
        if not record.succeeded:
            raise StepError(step.name, _error(record)) from cause
        return step.output.from_json_value(record.output)

    def take_signal(self, topic: str) -> Signal | None:
        """The oldest unread signal of ``topic`` this run knows of, taken."""
        for seq in sorted(self.signals):
            if self.signals[seq].topic == topic:
                return self.signals.pop(seq)
        return None

    def deadline_passed(self) -> bool:
        deadline = self.record.deadline
        return deadline is not None and self.passed(deadline)

    # -- commits (on the worker's loop) ---------------------------------------------------

    async def commit(self, commit: Commit) -> CommitOutcome:
        """Send a commit through the worker's committer; the lease it leaves us is taken
        here, on the loop, so the heartbeat never sees the old lease after the commit."""
        self.committing = True
        self.commits += 1
        try:
            outcome = await self.host.commit(commit)
        except Exception as exc:  # any: the network, rqlite, the clock, a bug of ours
            raise self.give_up("its commit failed", exc) from exc
        finally:
            self.committing = False
        if outcome.applied:
            self.turn_steps += 1
            if not commit.lean:
                self.commit_id = commit.commit_id
            if outcome.next_seq is None:  # the outcome, or the end of the turn
                self.held = False
            elif outcome.next_expiry is not None:  # a new message leased to us
                self.lease = replace(
                    self.lease, seq=outcome.next_seq, expires_at=outcome.next_expiry
                )
        return outcome

    def check_applied(self, outcome: CommitOutcome) -> None:
        """A step commit that did not apply: another worker holds the execution now."""
        if not outcome.applied:
            self.held = False
            log.warning(
                "execution %s: step not recorded (%s); another worker holds the execution",
                self.execution_id,
                outcome.error,
            )
            raise Unwind()

    def conclude(self, commit: Commit, outcome: CommitOutcome) -> None:
        self.held = False
        if outcome.applied and commit.status is not None and commit.status.is_final:
            self.host.finished(self.execution_id, commit.status, self.record.parent_id)
        if not outcome.applied:
            log.warning(
                "execution %s: outcome not recorded (%s); another worker holds it",
                self.execution_id,
                outcome.error,
            )

    def give_up(self, why: str, cause: BaseException) -> Unwind:
        """A failure outside user code: never the workflow's outcome. The run unwinds and
        the worker hands the execution back, to be run again (here or elsewhere)."""
        if self.failure is None:
            self.failure = cause
            log.warning(
                "execution %s: %s (%s: %s); handing it back to be retried",
                self.execution_id,
                why,
                type(cause).__name__,
                cause,
                exc_info=not isinstance(cause, RaftflowError),  # a bug's traceback, not a timeout's
            )
        return Unwind()

    # -- turns: suspended between them, resumed in memory --------------------------------

    def end_turn(self, how: str) -> None:
        """Thread-safe: tell the worker this turn is over ("suspended" or "done")."""
        loop = self.host.loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # a sync run's thread
            running = None
        if running is loop:
            # An async run, on the loop's own thread: the same callback in the same order,
            # without a write to the loop's self-pipe (and the wake-up that reads it).
            loop.call_soon(self._end_turn, how)
        else:
            loop.call_soon_threadsafe(self._end_turn, how)

    def _end_turn(self, how: str) -> None:
        if self.turn is not None and not self.turn.done():
            self.turn.set_result(how)

    def can_suspend(self) -> bool:
        return self.failure is None and self.fatal is None and self.host.sticky

    def suspend(self) -> bool:
        """In a sync run's thread: wait for the next turn; True to go on, False to unwind."""
        if not self.can_suspend():
            return False
        self._wake.clear()
        self.end_turn("suspended")
        self._wake.wait()
        return self._resumed

    async def asuspend(self) -> bool:
        """In an async run's task: wait for the next turn; True to go on, False to unwind."""
        if not self.can_suspend():
            return False
        self._awake = self.host.loop.create_future()
        self.end_turn("suspended")
        return await self._awake

    def fingerprint(self) -> tuple[str | None, int]:
        """What the execution's row says when nothing happened since this run's turn: the
        last full commit, and the last recorded call."""
        return self.commit_id, self.last_index

    def resume(self, claimed: Claimed) -> None:
        """On the loop: the worker claimed the execution again and found it unchanged."""
        assert claimed.execution is not None
        self.lease = claimed.lease
        self.record = claimed.execution
        self.signals = {signal.seq: signal for signal in claimed.signals}
        self.children = dict(claimed.children)
        self.held, self.turn_steps = True, 0
        self.turn = self.host.loop.create_future()
        self._wake_up(True)

    def discard(self) -> None:
        """On the loop: the continuation is given up; its run unwinds."""
        self._wake_up(False)

    def _wake_up(self, resumed: bool) -> None:
        self._resumed = resumed
        if self.is_async:
            if self._awake is not None and not self._awake.done():
                self._awake.set_result(resumed)
        else:
            self._wake.set()

    def wait(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the worker's loop from a workflow thread and wait for it."""
        return run_on_loop(coroutine, self.host.loop)


def _error(record: StepRecord) -> ErrorInfo:
    return record.error or ErrorInfo(type="Error", message="step failed")
