"""One run of an execution's workflow code by a worker that holds its lease.

The workflow function runs from the start. A step call whose result is recorded returns
that result (or raises its recorded error) without running the step: the code between
steps is replayed and sees the same values. The first unrecorded step runs, and its
result is committed -- before the next step runs, or with the workflow's outcome if it
returns first -- together with the ack of the current event and the publish of the next
(one fenced statement, :class:`raftflow.stores.ops.Commit`). While the worker keeps the turn
the next event stays leased to it, so the workflow simply continues in memory; when the
turn ends (or another event of the execution is waiting) the lease goes back to the
queue and the next step call unwinds the run: the next claimer replays up to there.

A step is therefore run at least once, and more than once only when a worker dies (or
loses its lease) between running it and committing its result. Keep the code between
steps quick and free of I/O (it is replayed anyway): a step's commit waits for it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import traceback
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import pydantic
from pydantic_core import PydanticSerializationError
from raftflow.engine.errors import (
    InputValidationError,
    NonDeterminismError,
    StepError,
    WorkflowError,
)
from raftflow.engine.events import RUN
from raftflow.engine.registry import StepDef, WorkflowDef
from raftflow.stores.base import ErrorInfo, ExecutionRecord, Status, StepRecord
from raftflow.stores.ops import Commit, CommitOutcome
from raftflow.transports.base import Lease
from raftflow.transports.errors import InvalidArgumentError, RaftflowError
from raftflow.transports.payload import from_json, to_json

if TYPE_CHECKING:
    from raftflow.engine.hooks import HookChain

log = logging.getLogger("raftflow.worker")

_current: contextvars.ContextVar[Activation | None] = contextvars.ContextVar(
    "raftflow_activation", default=None
)
_step: contextvars.ContextVar[StepInfo | None] = contextvars.ContextVar(
    "raftflow_step", default=None
)


@dataclass(frozen=True, slots=True)
class StepInfo:
    """Which step is running: see :func:`current_step`."""

    execution_id: str
    index: int
    name: str

    @property
    def key(self) -> str:
        """Stable across every run of this step of this execution: an idempotency key for
        the external call the step makes, so that a re-run after a crash is recognized."""
        return f"{self.execution_id}/{self.index}"


def current_step() -> StepInfo | None:
    """The step running here (inside a step function), or None."""
    return _step.get()


#: Longest traceback kept with an error (the tail is kept: it names the failing line).
MAX_TRACEBACK_CHARS = 16_000


class Runtime(Protocol):
    """What an activation needs from the worker that runs it."""

    loop: asyncio.AbstractEventLoop
    worker_id: str
    max_payload_bytes: int
    hooks: HookChain

    async def commit(self, commit: Commit) -> CommitOutcome: ...

    def clock_estimate(self) -> float: ...

    def keep_turn(self, activation: Activation) -> bool: ...


def current() -> Activation | None:
    """The activation whose workflow code is running here, if any."""
    return _current.get()


class Unwind(BaseException):
    """Ends a workflow run early: this worker no longer holds the execution's lease.

    A BaseException so that a workflow's ``except Exception`` cannot swallow it.
    """


def error_info(exc: BaseException) -> ErrorInfo:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ErrorInfo(
        type=type(exc).__qualname__,
        message=str(exc),
        traceback=text[-MAX_TRACEBACK_CHARS:],
    )


class Activation:
    """The state of one run: the lease, the recorded steps and the position in them."""

    def __init__(
        self,
        runtime: Runtime,
        workflow: WorkflowDef,
        lease: Lease,
        record: ExecutionRecord,
        steps: list[StepRecord],
    ) -> None:
        self.runtime = runtime
        self.workflow = workflow
        self.lease = lease
        self.record = record
        self.recorded = {step.idx: step for step in steps}
        self.next_idx = 0
        self.held = True  # this worker holds self.lease
        self.turn_steps = 0  # steps committed since the claim
        self.in_step = False
        self.fatal: WorkflowError | None = None
        self.committing = False  # a commit is in flight (the heartbeat leaves it alone)
        self.commits = 0
        # A step run but not yet committed: (record, output JSON, error JSON).
        self.pending: tuple[StepRecord, str | None, str | None] | None = None

    @property
    def execution_id(self) -> str:
        return self.record.id

    @property
    def is_async(self) -> bool:
        return self.workflow.is_async

    # -- running the workflow -------------------------------------------------------------

    def run_sync(self) -> None:
        """Run a sync workflow (in a worker thread) and commit its outcome."""
        token = _current.set(self)
        try:
            try:
                value = self.workflow.fn(*self._args())
            except Unwind:
                return
            except Exception as exc:
                final = self._final_commit(None, exc)
            else:
                final = self._final_commit(value, None)
        finally:
            _current.reset(token)
        if final is not None:
            try:
                self._conclude(final, self._wait(self._commit(final)))
            except Unwind:
                return

    async def run_async(self) -> None:
        """Run an async workflow on the worker's event loop and commit its outcome."""
        token = _current.set(self)
        try:
            try:
                value = await self.workflow.fn(*self._args())
            except Unwind:
                return
            except Exception as exc:
                final = self._final_commit(None, exc)
            else:
                final = self._final_commit(value, None)
        finally:
            _current.reset(token)
        if final is not None:
            try:
                self._conclude(final, await self._commit(final))
            except Unwind:
                return

    def _args(self) -> tuple[Any, ...]:
        try:
            return self.workflow.call_args(self.record.input)
        except pydantic.ValidationError as exc:
            raise InputValidationError(
                f"stored input of {self.execution_id!r} no longer validates: {exc}"
            ) from None

    # -- steps ----------------------------------------------------------------------------

    def call_step(self, step: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A step call from a sync workflow (its thread)."""
        if self.pending is not None:
            self._applied(self._wait(self._commit(self._take_pending())))
        idx, record = self._begin(step)
        if record is None:
            started = self.runtime.clock_estimate()
            info = StepInfo(self.execution_id, idx, step.name)
            value, exc = self._guarded(info, lambda: self._invoke_sync(step, args, kwargs))
            record = self._checkpoint(step, idx, started, value, exc)
            if exc is not None and not record.succeeded:
                raise StepError(step.name, _error(record)) from exc
        return self._result(step, record)

    async def acall_step(self, step: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """A step call from an async workflow (awaited on the worker's loop)."""
        if self.pending is not None:
            self._applied(await self._commit(self._take_pending()))
        idx, record = self._begin(step)
        if record is None:
            started = self.runtime.clock_estimate()
            info = StepInfo(self.execution_id, idx, step.name)
            value, exc = await self._aguarded(info, lambda: self._invoke_async(step, args, kwargs))
            record = self._checkpoint(step, idx, started, value, exc)
            if exc is not None and not record.succeeded:
                raise StepError(step.name, _error(record)) from exc
        return self._result(step, record)

    def _invoke_sync(self, step: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if step.is_async:
            # The loop's task does not inherit this thread's context: carry the step info.
            return self._wait(_with_step(_step.get(), step.fn(*args, **kwargs)))
        return step.fn(*args, **kwargs)

    async def _invoke_async(
        self, step: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if step.is_async:
            return await step.fn(*args, **kwargs)
        return await asyncio.to_thread(step.fn, *args, **kwargs)

    def _guarded(self, info: StepInfo, call: Callable[[], Any]) -> tuple[Any, Exception | None]:
        # Inside a step, step calls are plain calls: a step is one unit of work.
        tokens = _current.set(None), _step.set(info)
        self.in_step = True
        hooks = self.runtime.hooks
        hooks.before_step(info)
        started = time.perf_counter()
        error: Exception | None = None
        try:
            return call(), None
        except Exception as exc:
            error = exc
            return None, exc
        finally:
            hooks.after_step(info, error=error, duration=time.perf_counter() - started)
            self.in_step = False
            _step.reset(tokens[1])
            _current.reset(tokens[0])

    async def _aguarded(
        self, info: StepInfo, call: Callable[[], Coroutine[Any, Any, Any]]
    ) -> tuple[Any, Exception | None]:
        tokens = _current.set(None), _step.set(info)
        self.in_step = True
        hooks = self.runtime.hooks
        hooks.before_step(info)
        started = time.perf_counter()
        error: Exception | None = None
        try:
            return await call(), None
        except Exception as exc:
            error = exc
            return None, exc
        finally:
            hooks.after_step(info, error=error, duration=time.perf_counter() - started)
            self.in_step = False
            _step.reset(tokens[1])
            _current.reset(tokens[0])

    def _begin(self, step: StepDef) -> tuple[int, StepRecord | None]:
        if self.in_step:
            raise WorkflowError(
                f"execution {self.execution_id!r} called step {step.name!r} while another "
                "step was running: steps of one execution run one at a time (await each)"
            )
        idx = self.next_idx
        self.next_idx += 1
        record = self.recorded.get(idx)
        if record is not None and record.name != step.name:
            self.fatal = NonDeterminismError(
                f"execution {self.execution_id!r}: step {idx} is recorded as "
                f"{record.name!r} but the workflow now calls {step.name!r}"
            )
            raise self.fatal
        if record is None and not self.held:
            raise Unwind()  # the turn ended: the next claimer runs this step
        return idx, record

    def _result(self, step: StepDef, record: StepRecord) -> Any:
        if not record.succeeded:
            raise StepError(step.name, _error(record))
        return step.output.from_json_value(record.output)

    # -- commits --------------------------------------------------------------------------

    def _checkpoint(
        self, step: StepDef, idx: int, started: float, value: Any, exc: Exception | None
    ) -> StepRecord:
        """Record a step's outcome locally; it is committed before the next step runs, or
        together with the workflow's outcome when the workflow returns right after it --
        the code in between is deterministic, so only a crash in that moment re-runs the
        step, and a workflow's last step and its outcome cost one request, not two."""
        output = error = None
        if exc is None:
            try:
                output = to_json(
                    step.output.to_json_value(value),
                    what=f"result of step {step.name!r}",
                    limit=self.runtime.max_payload_bytes,
                )
            except (pydantic.ValidationError, PydanticSerializationError) as bad:
                exc = InvalidArgumentError(
                    f"result of step {step.name!r} does not match its annotation "
                    f"{step.output.annotation!r}: {bad}"
                )
            except InvalidArgumentError as bad:
                exc = bad
        if exc is not None:
            error = to_json(error_info(exc).to_json(), what="step error")
        record = StepRecord(
            execution_id=self.execution_id,
            idx=idx,
            name=step.name,
            succeeded=exc is None,
            output=None if output is None else from_json(output),
            error=None if error is None else ErrorInfo.from_json(from_json(error)),
            started_at=started,
            ended_at=self.runtime.clock_estimate(),
            worker_id=self.runtime.worker_id,
        )
        self.pending = (record, output, error)
        self.recorded[idx] = record
        return record

    def _take_pending(self, **outcome: Any) -> Commit:
        """The commit of the pending step, or of ``outcome`` alone, or of both."""
        pending, self.pending = self.pending, None
        commit = Commit(
            execution_id=self.execution_id,
            lease_seq=self.lease.seq,
            lease_token=self.lease.token,
            worker_id=self.runtime.worker_id,
            now=0.0,  # stamped by the committer
            **outcome,
        )
        if pending is None:
            return commit
        record, output, error = pending
        commit = replace(
            commit,
            step_idx=record.idx,
            step_name=record.name,
            step_succeeded=record.succeeded,
            step_output=output,
            step_error=error,
            step_started_at=record.started_at,
        )
        if not outcome:  # the workflow goes on: publish its next event
            commit = replace(
                commit,
                status=Status.RUNNING,
                next_event=_RUN_TEXT,
                next_priority=self.record.priority,
                next_token=self.lease.token if self.runtime.keep_turn(self) else None,
            )
        return commit

    def _final_commit(self, value: Any, exc: Exception | None) -> Commit | None:
        if not self.held:
            return None  # the next claimer replays to here and commits the outcome
        output = None
        if self.fatal is not None:
            exc = self.fatal
        if exc is None:
            try:
                output = to_json(
                    self.workflow.output.to_json_value(value),
                    what=f"result of workflow {self.workflow.name!r}",
                    limit=self.runtime.max_payload_bytes,
                )
            except (pydantic.ValidationError, PydanticSerializationError) as bad:
                exc = InvalidArgumentError(
                    f"result of workflow {self.workflow.name!r} does not match its "
                    f"annotation {self.workflow.output.annotation!r}: {bad}"
                )
            except InvalidArgumentError as bad:
                exc = bad
        error = None
        if exc is not None:
            info = error_info(exc)
            if isinstance(exc, StepError):  # report the step's own exception
                info = replace(exc.error, message=f"in step {exc.step!r}: {exc.error.message}")
            error = to_json(info.to_json(), what="workflow error")
        return self._take_pending(
            status=Status.SUCCEEDED if exc is None else Status.FAILED, output=output, error=error
        )

    def _applied(self, outcome: CommitOutcome) -> None:
        if not outcome.applied:
            self.held = False
            log.warning(
                "execution %s: step not recorded (%s); another worker holds the execution",
                self.execution_id,
                outcome.error,
            )
            raise Unwind()

    def _advance(self, outcome: CommitOutcome) -> None:
        """Take the lease the commit left us (on the loop, before the heartbeat looks)."""
        self.turn_steps += 1
        if outcome.next_seq is None:
            self.held = False
        else:
            self.lease = replace(
                self.lease, seq=outcome.next_seq, expires_at=outcome.next_expiry or 0.0
            )

    def _conclude(self, commit: Commit, outcome: CommitOutcome) -> None:
        self.held = False
        if outcome.applied and commit.status is not None:
            self.runtime.hooks.after_execution(self.execution_id, commit.status)
        if not outcome.applied:
            log.warning(
                "execution %s: outcome not recorded (%s); another worker holds it",
                self.execution_id,
                outcome.error,
            )

    async def _commit(self, commit: Commit) -> CommitOutcome:
        """Send a commit through the worker's committer (always on the worker's loop).

        A commit that cannot be sent within the retry budget is not the workflow's
        failure: the run unwinds (past any ``except Exception`` in workflow code), the
        lease lapses, and the event is delivered again -- to find the commit applied, if
        it was, or to redo the step.
        """
        self.committing = True
        self.commits += 1
        try:
            outcome = await self.runtime.commit(commit)
            if outcome.applied:
                # Here, not in the workflow's thread: the heartbeat must never see the
                # commit finished and the old lease still in place.
                self._advance(outcome)
            return outcome
        except RaftflowError as exc:
            self.held = False
            log.warning(
                "execution %s: commit failed (%s); its lease will lapse and it will be retried",
                self.execution_id,
                exc,
            )
            raise Unwind() from exc
        finally:
            self.committing = False

    def _wait(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on the worker's loop from a workflow thread and wait for it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.runtime.loop).result()


async def _with_step(info: StepInfo | None, coroutine: Coroutine[Any, Any, Any]) -> Any:
    _step.set(info)
    return await coroutine


def _error(record: StepRecord) -> ErrorInfo:
    return record.error or ErrorInfo(type="Error", message="step failed")


_RUN_TEXT = to_json(RUN, what="event")
