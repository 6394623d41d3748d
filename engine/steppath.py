"""The step path: what a workflow does at each call, as I/O-free flows.

A flow here is a generator that yields :data:`Command` objects and receives their
results; :mod:`raftflow.engine.drivers` performs them, in the workflow's thread (sync
workflows) or on the worker's loop (async ones), so each path below exists once::

    workflow code        flow (this module)                          the driver performs
    -------------        ------------------                          -------------------
    (claimed)       -->  run_workflow: InvokeWorkflow -------------> the workflow function
    charge(order)   -->  call_step:
                          1. the previous step's staged commit ----> SendCommit: committer,
                                                                     one fenced statement
                          2. the next call index: recorded? yes ---> (nothing: replayed)
                          3. not recorded: RunStep ----------------> the step function
                          4. stage its outcome (JSON)
                    <--   5. its result, or StepError
    return value    -->  run_workflow: the staged step and the outcome, one SendCommit

A new primitive (a sleep, a signal, a child) is one more flow here, driven the same way.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from raftflow.engine.activation import Activation
from raftflow.engine.backend import Commit
from raftflow.engine.context import StepInfo
from raftflow.engine.registry import StepDef

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class InvokeWorkflow:
    """Call the workflow function; the reply is an :class:`Outcome`."""


@dataclass(frozen=True, slots=True)
class RunStep:
    """Run a step function (hooks around it, ``current_step()`` set); reply: an Outcome."""

    step: StepDef
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    info: StepInfo


@dataclass(frozen=True, slots=True)
class SendCommit:
    """Commit through the worker's committer; the reply is a ``CommitOutcome``."""

    commit: Commit


Command = InvokeWorkflow | RunStep | SendCommit
StepFlow = Generator[Command, Any, T]


@dataclass(slots=True)
class Outcome:
    """What user code returned or raised."""

    value: Any = None
    error: Exception | None = None


def run_workflow(run: Activation) -> StepFlow[None]:
    """The whole run: the workflow function, then its outcome's commit."""
    outcome: Outcome = yield InvokeWorkflow()
    commit = run.final_commit(outcome.value, outcome.error)
    if commit is not None:
        run.conclude(commit, (yield SendCommit(commit)))


def call_step(
    run: Activation, step: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> StepFlow[Any]:
    """One step call from workflow code: replayed from its record, or run and staged."""
    if run.staged is not None:
        run.check_applied((yield SendCommit(run.take_staged())))
    index, record = run.next_call(step.name)
    if record is None:
        started = run.host.clock_estimate()
        info = StepInfo(run.execution_id, index, step.name)
        outcome: Outcome = yield RunStep(step, args, kwargs, info)
        record = run.stage_step(step, index, started, outcome.value, outcome.error)
        return run.result(step, record, cause=outcome.error)
    return run.result(step, record)
