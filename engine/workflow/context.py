"""Where code is running: in a workflow (an activation), in a step, or outside both.

Two context variables say it. Workflow code sees the :class:`Activation` that runs it
(a step call is then a checkpointed step, not a plain call); step code sees its
:class:`StepInfo` (:func:`current_step`). Inside a step the activation is unset again:
a step is one unit of work, and steps it calls are plain calls.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raftflow.errors import NotInWorkflowError

if TYPE_CHECKING:
    from raftflow.engine.workflow.activation import Activation

_activation: contextvars.ContextVar[Activation | None] = contextvars.ContextVar(
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
    attempt: int = 1  # of a retried step: 1, 2, ...

    @property
    def key(self) -> str:
        """Stable across every run of this step of this execution: an idempotency key for
        the external call the step makes, so that a re-run after a crash is recognized."""
        return f"{self.execution_id}/{self.index}"


def current_step() -> StepInfo:
    """The step running here; :class:`NotInWorkflowError` outside a step function."""
    info = _step.get()
    if info is None:
        raise NotInWorkflowError(
            "current_step() is only available while a step runs (in a function decorated "
            "with @engine.step, called from a workflow)"
        )
    return info


def step_or_none() -> StepInfo | None:
    """The step running here, or None."""
    return _step.get()


def current_activation() -> Activation | None:
    """The activation whose workflow code runs here, if any (never inside a step)."""
    return _activation.get()


@contextmanager
def in_workflow(activation: Activation) -> Iterator[None]:
    """Workflow code of ``activation`` runs in this block."""
    token = _activation.set(activation)
    try:
        yield
    finally:
        _activation.reset(token)


@contextmanager
def in_step(info: StepInfo | None) -> Iterator[None]:
    """Step code runs in this block: no activation, ``current_step()`` is ``info``."""
    tokens = _activation.set(None), _step.set(info)
    try:
        yield
    finally:
        _step.reset(tokens[1])
        _activation.reset(tokens[0])


def runs_here(context: contextvars.Context, run: Activation) -> bool:
    """Whether code running in ``context`` is ``run``'s (a task its workflow code made)."""
    return context.get(_activation) is run


def workflow_run(what: str, is_async: bool) -> Activation | None:
    """The activation of the workflow running here, or None outside workflow code. A call
    of the sync API from an async workflow (or the reverse) raises, naming the right one."""
    run = _activation.get()
    if run is not None and run.is_async != is_async:
        hint = f"await engine.{what}_async(...)" if run.is_async else f"engine.{what}(...)"
        kind = "an async" if run.is_async else "a sync"
        raise NotInWorkflowError(f"this is {kind} workflow: call {hint}")
    return run


def require_workflow(what: str, is_async: bool) -> Activation:
    """:func:`workflow_run`, which must find one (``engine.<what>()`` is for workflows)."""
    run = workflow_run(what, is_async)
    if run is None:
        raise NotInWorkflowError(f"engine.{what}() only works inside a workflow")
    return run
