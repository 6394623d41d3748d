"""A replay of a recorded history through the code of now, with no side effect.

The run is a worker's (:class:`Activation`, the step path, the drivers): each call is
checked against its record by :meth:`Activation.next_call` -- the check that fails a
worker's run with :class:`~raftflow.errors.NonDeterminismError` -- and its recorded result
is returned. What makes it a replay is that it holds no lease (``held`` is False): the
step path then never runs, stages nor commits a call that is not done in the history, and
waits for its turn instead, which a replay never gives (:meth:`ReplayActivation.suspend`),
so the run stops there. Its host's clock stands past every recorded wake time, so a
recorded sleep never waits. The host refuses any write (:class:`ReplayHost`): a replay
that reached one would be a bug of the step path (an ``AssertionError``), never a verdict.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from raftflow.engine.workflow.activation import Activation
from raftflow.engine.workflow.divergence import Call, Divergence
from raftflow.engine.workflow.drivers import run_async, run_sync
from raftflow.engine.workflow.registry import Registry, WorkflowDef
from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.records import Claimed, ExecutionRecord, Status, StepRecord
from raftflow.transports.contract import Lease

from raftflow.errors import InputValidationError

if TYPE_CHECKING:
    from raftflow.engine.runtime.hooks import HookChain
    from raftflow.stores.flows import StoreFlows
    from raftflow.transports.db.flow import Flow

T = TypeVar("T")

#: Statuses the workflow's code gave the execution when its run ended where the history
#: does: code that now makes one more call there behaves otherwise. (A cancel ends a run
#: from outside at any call; a pending or running one has more calls to come.)
ENDED_BY_CODE = (Status.SUCCEEDED, Status.FAILED, Status.CONTINUED)


class ReplayHost:
    """The host of replays: no lease, no write, no wait."""

    worker_id = "replay"
    sticky = False  # no turn to wait for

    def __init__(
        self,
        registry: Registry,
        flows: StoreFlows,
        hooks: HookChain,
        *,
        max_payload_bytes: int,
        max_history: int,
    ) -> None:
        self.registry = registry
        self.flows = flows  # built into flows only by calls past the history: never sent
        self.hooks = hooks
        self.max_payload_bytes = max_payload_bytes
        self.max_history = max_history
        self.loop: asyncio.AbstractEventLoop = asyncio.get_running_loop()

    async def commit(self, commit: Commit) -> CommitOutcome:
        raise AssertionError(f"a replay of {commit.execution_id!r} reached a commit")

    async def run_flow(self, flow: Flow[T], route: str | None = None) -> T:
        raise AssertionError("a replay reached a request of the workflow")

    def holds_here(self, execution_id: str) -> bool:
        return True  # asked only by calls past the history, which a replay never makes

    def same_cluster(self, one: str, other: str) -> bool:
        return True

    # The clock stands past every recorded wake time: a recorded sleep or timeout has
    # passed, and no wait begins (a call that would wait is past the history anyway).
    def clock_estimate(self) -> float:
        return math.inf

    def clock_uncertainty(self) -> float:
        return 0.0

    def clock_earliest(self) -> float:
        return math.inf

    def short_wait(self) -> float:
        return 0.0

    def keep_turn(self, turn_steps: int) -> bool:
        return False

    def finished(self, execution_id: str, status: Status, parent_id: str | None = None) -> None:
        raise AssertionError("a replay commits no outcome")


class ReplayActivation(Activation):
    """A run of ``steps`` that holds no lease: it stops at the first call its history
    has not done, and keeps the code's outcome instead of committing it."""

    def __init__(
        self,
        host: ReplayHost,
        workflow: WorkflowDef,
        execution: ExecutionRecord,
        steps: list[StepRecord],
    ) -> None:
        lease = Lease(seq=0, group_id=execution.id, event="", token="", expires_at=0.0)
        super().__init__(host, workflow, Claimed(lease, execution, steps))
        self.held = False  # no call past the history runs, nothing is committed
        self.last_call: Call | None = None  # the code's latest call
        self.stopped = False  # the code made a call its history has not done
        self.ended: tuple[Any, Exception | None] | None = None  # the code's outcome

    def next_call(self, kind: str, name: str) -> tuple[int, StepRecord | None]:
        self.last_call = Call(kind, name)
        return super().next_call(kind, name)

    def suspend(self) -> bool:
        self.stopped = True
        return False  # the run unwinds: no turn comes

    async def asuspend(self) -> bool:
        return self.suspend()

    def final_commit(self, value: Any, exc: Exception | None) -> Commit | None:
        self.ended = (value, exc)
        return None


@dataclass(frozen=True, slots=True)
class Verdict:
    """How far the code agrees with a history: the calls it made as recorded, and the
    first one where it does not (None: it agrees as far as the history goes)."""

    calls_checked: int
    divergence: Divergence | None


async def replay_run(run: ReplayActivation) -> Verdict:
    """Run ``run`` as a worker does -- a sync workflow in a thread, an async one as a task
    -- and judge it. An engine failure on the way is raised, never a verdict."""
    if run.is_async:
        await run_async(run)
    else:
        await asyncio.to_thread(run_sync, run)
    if run.failure is not None:
        raise run.failure
    return verdict(run)


def verdict(run: ReplayActivation) -> Verdict:
    """The verdict on a replay that is over (see :class:`Verdict`)."""
    if run.divergence is not None:
        return Verdict(run.divergence.index, run.divergence)
    index = run.next_index - 1  # the code's last call
    if run.stopped:
        record = run.recorded.get(index)
        if record is not None:  # recorded, not done: the execution waits there
            return Verdict(index + 1, None)
        if run.record.status not in ENDED_BY_CODE:  # in flight: the history ends here
            return Verdict(index, None)
        status, called = run.record.status.value, run.last_call
        reason = (
            f"the history ends at call {index} (the execution {status} there) but the code "
            f"now calls {called}"
        )
        return Verdict(index, Divergence(index, None, called, reason))
    if run.ended is None:
        raise AssertionError(f"the replay of {run.execution_id!r} neither ended nor stopped")
    error = run.ended[1]
    if isinstance(error, InputValidationError):
        reason = f"the code refuses the recorded input: {error}"
        return Verdict(0, Divergence(0, _recorded(run, 0), None, reason))
    index = run.next_index
    recorded = _recorded(run, index)
    if recorded is None or index > run.last_index:
        return Verdict(index, None)
    reason = f"the code ends at call {index} but the history records {recorded} there"
    return Verdict(index, Divergence(index, recorded, None, reason))


def _recorded(run: ReplayActivation, index: int) -> Call | None:
    record = run.recorded.get(index)
    return None if record is None else Call(record.kind, record.name)
