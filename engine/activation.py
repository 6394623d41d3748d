"""One run of an execution's workflow code by a worker that holds its lease.

The workflow function runs from the start. A step call whose result is recorded returns
that result (or raises its recorded error) without running the step: the code between
steps is replayed and sees the same values. The first unrecorded step runs, and its
outcome is staged here and committed -- before the next step runs, or with the
workflow's outcome if it returns first -- together with the ack of the current event and
the publish of the next (:class:`~raftflow.engine.backend.Commit`, one fenced statement).
While the worker keeps the turn the next event stays leased to it, so the workflow simply
continues in memory; when the turn ends (or another event of the execution is waiting)
the next event goes back to the queue and the next step call unwinds the run: the next
claimer replays up to there. :mod:`raftflow.engine.steppath` is that path as a flow.

Who changes what: the worker's event loop owns the lease (``lease``, ``held``,
``turn_steps``, ``committing``); the thread or task running the workflow code owns the
replay (``next_index``, ``staged``, ``in_step``). Each side only reads the other's.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import pydantic
from pydantic_core import PydanticSerializationError
from raftflow.engine.backend import Commit, CommitOutcome
from raftflow.engine.errors import (
    InputValidationError,
    NonDeterminismError,
    StepError,
    WorkflowError,
)
from raftflow.engine.events import RUN_TEXT
from raftflow.engine.registry import Codec, StepDef, WorkflowDef
from raftflow.stores.base import ErrorInfo, ExecutionRecord, Status, StepRecord
from raftflow.transports.base import Lease
from raftflow.transports.errors import InvalidArgumentError, RaftflowError
from raftflow.transports.payload import from_json, to_json

if TYPE_CHECKING:
    from raftflow.engine.hooks import HookChain

log = logging.getLogger("raftflow.worker")

#: Longest traceback kept with an error (the tail is kept: it names the failing line).
MAX_TRACEBACK_CHARS = 16_000


class Host(Protocol):
    """What an activation needs from the worker that runs it."""

    loop: asyncio.AbstractEventLoop
    worker_id: str
    max_payload_bytes: int
    hooks: HookChain

    async def commit(self, commit: Commit) -> CommitOutcome: ...

    def clock_estimate(self) -> float: ...

    def keep_turn(self, activation: Activation) -> bool: ...


class Unwind(BaseException):
    """Ends a workflow run early: this worker no longer holds (or gives up) the lease.

    A BaseException so that a workflow's ``except Exception`` cannot swallow it.
    """


@dataclass(frozen=True, slots=True)
class Staged:
    """A step that ran and is not committed yet: its record and its JSON."""

    record: StepRecord
    output: str | None
    error: str | None


def error_info(exc: BaseException) -> ErrorInfo:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ErrorInfo(
        type=type(exc).__qualname__, message=str(exc), traceback=text[-MAX_TRACEBACK_CHARS:]
    )


class Activation:
    """The state of one run: the lease, the recorded steps and the position in them."""

    def __init__(
        self,
        host: Host,
        workflow: WorkflowDef,
        lease: Lease,
        record: ExecutionRecord,
        steps: list[StepRecord],
    ) -> None:
        self.host = host
        self.workflow = workflow
        self.record = record
        self.recorded = {step.idx: step for step in steps}
        # The loop's side.
        self.lease = lease
        self.held = True  # this worker holds self.lease
        self.turn_steps = 0  # steps committed since the claim
        self.committing = False  # a commit is in flight: the heartbeat leaves it alone
        self.commits = 0
        # The workflow code's side.
        self.next_index = 0
        self.staged: Staged | None = None
        self.in_step = False
        self.fatal: WorkflowError | None = None  # a NonDeterminismError user code cannot hide
        #: Set when the run gave up for a reason outside user code: hand the lease back.
        self.failure: BaseException | None = None

    @property
    def execution_id(self) -> str:
        return self.record.id

    @property
    def is_async(self) -> bool:
        return self.workflow.is_async

    def args(self) -> tuple[Any, ...]:
        try:
            return self.workflow.call_args(self.record.input)
        except pydantic.ValidationError as exc:
            raise InputValidationError(
                f"stored input of {self.execution_id!r} no longer validates: {exc}"
            ) from None

    # -- replay ---------------------------------------------------------------------------

    def next_call(self, name: str) -> tuple[int, StepRecord | None]:
        """The index of the workflow's next call, and its record if it has one."""
        if self.in_step:
            raise WorkflowError(
                f"execution {self.execution_id!r} called step {name!r} while another step "
                "was running: steps of one execution run one at a time (await each)"
            )
        index = self.next_index
        self.next_index += 1
        record = self.recorded.get(index)
        if record is not None and record.name != name:
            self.fatal = NonDeterminismError(
                f"execution {self.execution_id!r}: step {index} is recorded as "
                f"{record.name!r} but the workflow now calls {name!r}"
            )
            raise self.fatal
        if record is None and not self.held:
            raise Unwind()  # the turn ended: the next claimer runs this step
        return index, record

    def result(self, step: StepDef, record: StepRecord, cause: Exception | None = None) -> Any:
        """A step's value from its record, or :class:`StepError` (caused by the step's own
        exception when it ran in this run)."""
        if not record.succeeded:
            raise StepError(step.name, _error(record)) from cause
        return step.output.from_json_value(record.output)

    # -- staging --------------------------------------------------------------------------

    def stage_step(
        self, step: StepDef, index: int, started: float, value: Any, exc: Exception | None
    ) -> StepRecord:
        """Keep a step's outcome until its commit (with the next call, or the outcome)."""
        output, exc = self._encode(step.output, value, exc, f"step {step.name!r}")
        error = None if exc is None else to_json(error_info(exc).to_json(), what="step error")
        record = StepRecord(
            execution_id=self.execution_id,
            idx=index,
            name=step.name,
            succeeded=exc is None,
            output=None if output is None else from_json(output),
            error=None if error is None else ErrorInfo.from_json(from_json(error)),
            started_at=started,
            ended_at=self.host.clock_estimate(),
            worker_id=self.host.worker_id,
        )
        self.staged = Staged(record, output, error)
        self.recorded[index] = record
        return record

    def take_staged(self, **outcome: Any) -> Commit:
        """The commit of the staged step, or of ``outcome`` (a status) alone, or both."""
        staged, self.staged = self.staged, None
        commit = Commit(
            execution_id=self.execution_id,
            lease_seq=self.lease.seq,
            lease_token=self.lease.token,
            worker_id=self.host.worker_id,
            **outcome,
        )
        if staged is None:
            return commit
        commit = replace(
            commit,
            step_idx=staged.record.idx,
            step_name=staged.record.name,
            step_succeeded=staged.record.succeeded,
            step_output=staged.output,
            step_error=staged.error,
            step_started_at=staged.record.started_at,
        )
        if not outcome:  # the workflow goes on: publish its next event
            commit = replace(
                commit,
                status=Status.RUNNING,
                next_event=RUN_TEXT,
                next_priority=self.record.priority,
                next_token=self.lease.token if self.host.keep_turn(self) else None,
            )
        return commit

    def final_commit(self, value: Any, exc: Exception | None) -> Commit | None:
        """The commit of the workflow's outcome (with the staged step), or None when this
        worker no longer holds the execution: the next claimer replays to here."""
        if not self.held:
            return None
        if self.fatal is not None:
            exc = self.fatal
        output, exc = self._encode(
            self.workflow.output, value, exc, f"workflow {self.workflow.name!r}"
        )
        error = None
        if exc is not None:
            info = error_info(exc)
            if isinstance(exc, StepError):  # report the step's own exception
                info = replace(exc.error, message=f"in step {exc.step!r}: {exc.error.message}")
            error = to_json(info.to_json(), what="workflow error")
        status = Status.SUCCEEDED if exc is None else Status.FAILED
        return self.take_staged(status=status, output=output, error=error)

    def _encode(
        self, codec: Codec, value: Any, exc: Exception | None, what: str
    ) -> tuple[str | None, Exception | None]:
        """A result as JSON text, or the error that makes it unusable (it becomes the
        outcome: a result that does not match its annotation is the code's bug)."""
        if exc is not None:
            return None, exc
        try:
            return to_json(
                codec.to_json_value(value),
                what=f"result of {what}",
                limit=self.host.max_payload_bytes,
            ), None
        except (pydantic.ValidationError, PydanticSerializationError) as bad:
            return None, InvalidArgumentError(
                f"result of {what} does not match its annotation {codec.annotation!r}: {bad}"
            )
        except InvalidArgumentError as bad:
            return None, bad

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
            if outcome.next_seq is None:  # the outcome, or the end of the turn
                self.held = False
            else:
                self.lease = replace(
                    self.lease, seq=outcome.next_seq, expires_at=outcome.next_expiry or 0.0
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
        if outcome.applied and commit.status is not None:
            self.host.hooks.after_execution(self.execution_id, commit.status)
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

    def wait(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the worker's loop from a workflow thread and wait for it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.host.loop).result()


def _error(record: StepRecord) -> ErrorInfo:
    return record.error or ErrorInfo(type="Error", message="step failed")
