"""Worker lifecycle hooks, for metrics and tracing (dramatiq's middleware, in small).

Subclass :class:`Hooks`, override what you need, and register it with
``engine.add_hooks(MyHooks())``. Hooks run in the worker, in the thread or task that runs
the step; a hook that raises is logged and ignored, never fatal to the step.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from raftflow.engine.context import StepInfo
from raftflow.stores.base import Status

log = logging.getLogger("raftflow.hooks")


class Hooks:
    """No-op hooks; override any of them."""

    def before_step(self, step: StepInfo) -> None:
        """A step is about to run (not called for steps replayed from their record)."""

    def after_step(self, step: StepInfo, *, error: BaseException | None, duration: float) -> None:
        """A step ran; ``error`` is what it raised, if anything; ``duration`` in seconds."""

    def after_execution(self, execution_id: str, status: Status) -> None:
        """An execution reached a final status (committed)."""


class HookChain(Hooks):
    """Calls several hooks in order, logging (not raising) what they raise."""

    def __init__(self, hooks: Sequence[Hooks] = ()) -> None:
        self.hooks = list(hooks)

    def _each(self, name: str, *args: Any, **kwargs: Any) -> None:
        for hook in self.hooks:
            try:
                getattr(hook, name)(*args, **kwargs)
            except Exception:
                log.exception("hook %s.%s failed", type(hook).__name__, name)

    def before_step(self, step: StepInfo) -> None:
        self._each("before_step", step)

    def after_step(self, step: StepInfo, *, error: BaseException | None, duration: float) -> None:
        self._each("after_step", step, error=error, duration=duration)

    def after_execution(self, execution_id: str, status: Status) -> None:
        self._each("after_execution", execution_id, status)
