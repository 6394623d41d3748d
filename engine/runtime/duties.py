"""Host duties: the tasks a worker run carries besides its executions.

Presence (its row in ``workers``, and the duties' leases), retention (deleting expired
executions, one worker at a time) and the keeping of cron schedules are each a
:class:`Duty`: a task started with the run and cancelled when it ends, then given a last
word. What a duty may know of the worker is :class:`WorkerView`, and nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from raftflow.engine.runtime.hooks import HookChain
    from raftflow.engine.runtime.worker import WorkerOptions, WorkerStats


class WorkerView(Protocol):
    """The worker a duty runs in, as the duty sees it."""

    @property
    def worker_id(self) -> str: ...

    @property
    def options(self) -> WorkerOptions: ...

    @property
    def stats(self) -> WorkerStats: ...

    @property
    def hooks(self) -> HookChain: ...

    @property
    def lanes(self) -> tuple[str, ...]:
        """The lanes it claims (engine/workflow/queues.py)."""
        ...

    @property
    def starts(self) -> str:
        """Its workflows' start settings, as it publishes them (engine/workflow/starts.py)."""
        ...

    def running(self) -> int:
        """How many executions it runs now."""
        ...

    def draining(self) -> bool:
        """Whether it is stopping (no new claims)."""
        ...


class Duty(Protocol):
    """A task of a worker run."""

    #: The task's name (in logs and in ``asyncio.all_tasks()``).
    name: str

    async def run(self) -> None:
        """Work until cancelled; a failure is logged and tried again, never raised."""
        ...

    async def leave(self) -> None:
        """The run is over: a last, best-effort word (bounded in time)."""
        ...
