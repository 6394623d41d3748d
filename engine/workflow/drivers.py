"""The two drivers of the step path (:mod:`raftflow.engine.workflow.steppath`).

:func:`drive` performs a flow's commands in a sync workflow's thread (commits are sent on
the worker's loop and waited for); :func:`adrive` performs them on the loop, for async
workflows. They differ by ``await`` alone. Both draw the line between user code and the
engine: what user code raises becomes an :class:`Outcome` (a step's error, the workflow's
failure); what the engine's own flow raises -- other than the deliberate
:class:`~raftflow.errors.WorkflowError` it raises into workflow code -- is an
infrastructure failure, never an outcome: the run unwinds and the execution is handed
back (:meth:`Activation.give_up`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import time
from collections.abc import Awaitable, Coroutine, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

from raftflow.engine.workflow.activation import Activation, ContinueAsNew, Unwind
from raftflow.engine.workflow.context import StepInfo, in_step, in_workflow
from raftflow.engine.workflow.steppath import (
    Command,
    Io,
    Outcome,
    Pause,
    RunStep,
    SendCommit,
    StepFlow,
    Suspend,
    run_workflow,
)

from raftflow.errors import (
    DatabaseError,
    InvalidArgumentError,
    StepTimeoutError,
    StoreError,
    WorkflowError,
)

T = TypeVar("T")


def drive(run: Activation, flow: StepFlow[T]) -> T:
    """Run a step-path flow to its end in a sync workflow's thread."""
    reply: Any = None
    while not isinstance(command := _advance(run, flow, reply), _Done):
        reply = _perform(run, command)
    return command.value  # type: ignore[no-any-return]


async def adrive(run: Activation, flow: StepFlow[T]) -> T:
    """Run a step-path flow to its end on the worker's loop (an async workflow's call), in
    its turn among the workflow's concurrent calls (:mod:`raftflow.engine.workflow.callorder`)."""
    return await run.calls.call(lambda: _adrive(run, flow))


async def _adrive(run: Activation, flow: StepFlow[T]) -> T:
    reply: Any = None
    while not isinstance(command := _advance(run, flow, reply), _Done):
        reply = await _aperform(run, command)
    return command.value  # type: ignore[no-any-return]


def run_sync(run: Activation) -> None:
    """A sync workflow's whole run (all its turns), in a thread of its own."""
    try:
        with suppress(Unwind):
            drive(run, run_workflow(run))
    finally:
        run.end_turn("done")


async def run_async(run: Activation) -> None:
    """An async workflow's whole run (all its turns), as a task on the worker's loop."""
    try:
        with suppress(Unwind):
            await _adrive(run, run_workflow(run))
    finally:
        run.end_turn("done")


@dataclass(frozen=True, slots=True)
class _Done:
    value: Any


def _advance(run: Activation, flow: StepFlow[Any], reply: Any) -> Command | _Done:
    try:
        return flow.send(reply)
    except StopIteration as stop:
        return _Done(stop.value)
    except (WorkflowError, StoreError, Unwind):
        raise  # meant for workflow code (StepError, a refused send...), or the unwind
    except Exception as exc:
        raise run.give_up("the engine failed on its step path", exc) from exc


def _perform(run: Activation, command: Command) -> Any:
    if isinstance(command, SendCommit):
        return run.wait(run.commit(command.commit))
    if isinstance(command, Pause):
        return time.sleep(command.seconds)
    if isinstance(command, Suspend):
        return run.suspend()
    outcome = Outcome()
    if isinstance(command, Io):
        with _refusals(run, outcome):
            outcome.value = run.wait(run.host.run_flow(command.flow, command.route))
    elif isinstance(command, RunStep):
        with _step_code(run, command.info, outcome):
            outcome.value = _call_step(run, command)
    else:
        with _workflow_code(run, outcome):
            outcome.value = run.workflow.fn(*run.args())
    return outcome


async def _aperform(run: Activation, command: Command) -> Any:
    if isinstance(command, SendCommit):
        return await run.commit(command.commit)
    if isinstance(command, Pause):
        return await asyncio.sleep(command.seconds)
    if isinstance(command, Suspend):
        return await run.asuspend()
    outcome = Outcome()
    if isinstance(command, Io):
        with _refusals(run, outcome):
            outcome.value = await run.host.run_flow(command.flow, command.route)
    elif isinstance(command, RunStep):
        with _step_code(run, command.info, outcome):
            outcome.value = await _acall_step(run, command)
    else:
        with _workflow_code(run, outcome):
            outcome.value = await run.workflow.fn(*run.args())
        await run.calls.end()  # a call still under way is recorded before the outcome
    return outcome


def _call_step(run: Activation, command: RunStep) -> Any:
    step, timeout = command.step, command.step.timeout
    call = functools.partial(step.fn, *command.args, **command.kwargs)
    if step.is_async:
        # On the loop: its task does not inherit this thread's context, so carry the info.
        return run.wait(_with_step(command.info, _timed(call(), timeout, step.name)))
    if timeout is None:
        return call()
    # A thread of its own, so the wait can end; a thread cannot be killed: if the step
    # overruns, its late result is dropped (this attempt has failed and is recorded so).
    context = contextvars.copy_context()
    future = _OVERRUN.submit(context.run, call)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        raise _timeout(step.name, timeout) from None


async def _acall_step(run: Activation, command: RunStep) -> Any:
    step, timeout = command.step, command.step.timeout
    if step.is_async:
        return await _timed(step.fn(*command.args, **command.kwargs), timeout, step.name)
    # A thread, not the loop; to_thread copies this context (current_step() is set).
    thread = asyncio.to_thread(step.fn, *command.args, **command.kwargs)
    return await _timed(thread, timeout, step.name)


async def _timed(awaitable: Awaitable[Any], timeout: float | None, name: str) -> Any:
    """An async step's attempt, cancelled after ``timeout`` seconds."""
    if timeout is None:
        return await awaitable
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise _timeout(name, timeout) from None


def _timeout(name: str, timeout: float) -> StepTimeoutError:
    return StepTimeoutError(f"step {name!r} ran longer than its timeout of {timeout:g}s")


#: Sync steps with a timeout run here (a thread each, so one overrunning blocks no other).
_OVERRUN = concurrent.futures.ThreadPoolExecutor(32, thread_name_prefix="raftflow-step")


async def _with_step(info: StepInfo, coroutine: Coroutine[Any, Any, Any]) -> Any:
    with in_step(info):
        return await coroutine


@contextmanager
def _refusals(run: Activation, outcome: Outcome) -> Iterator[None]:
    """A database request of a primitive: a refusal (no such execution, bad input) is its
    outcome; any other failure is the infrastructure's, and hands the execution back."""
    try:
        yield
    except (StoreError, InvalidArgumentError, WorkflowError) as exc:
        outcome.error = exc
    except Exception as exc:
        raise run.give_up("a request of the workflow failed", exc) from exc


@contextmanager
def _workflow_code(run: Activation, outcome: Outcome) -> Iterator[None]:
    """Workflow code runs here; what it raises is its outcome, except a database error:
    that is the infrastructure's (a workflow does no I/O of its own between steps)."""
    try:
        with in_workflow(run):
            yield
    except ContinueAsNew as again:
        outcome.continue_input = again.input_json
    except DatabaseError as exc:
        raise run.give_up("a database call failed in workflow code", exc) from exc
    except Exception as exc:
        outcome.error = exc


@contextmanager
def _step_code(run: Activation, info: StepInfo, outcome: Outcome) -> Iterator[None]:
    """A step function runs here: ``current_step()`` is set, hooks run around it, and what
    it raises is its outcome."""
    hooks = run.host.hooks
    run.in_step = True
    hooks.before_step(info)
    started = time.perf_counter()
    try:
        with in_step(info):
            yield
    except Exception as exc:
        outcome.error = exc
    finally:
        run.in_step = False
        hooks.after_step(info, error=outcome.error, duration=time.perf_counter() - started)
