"""``engine.replay``: one execution's recorded history through the code of now, with no
side effect, and the first divergence if there is one (``raftflow replay`` prints it).

Two reads (the execution, its calls); then the workflow function runs with each call's
recorded result returned and no step body run (:mod:`raftflow.engine.workflow.replay`).
Nothing is written: no lease, no commit, no request of the workflow's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from raftflow.engine.runtime.hooks import HookChain
from raftflow.engine.workflow.divergence import Divergence
from raftflow.engine.workflow.replay import ReplayActivation, ReplayHost, replay_run
from raftflow.stores.records import Status

from raftflow.errors import ExecutionNotFoundError

if TYPE_CHECKING:
    from raftflow.engine.workflow.registry import Registry
    from raftflow.stores.store import SqlStore


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """What ``engine.replay(execution_id)`` found: how many of the execution's recorded
    calls the code of now makes alike (``calls_checked``), and the first call where it
    does not (``divergence``: index, the recorded call, the call made now; None when the
    code agrees with the whole history -- or, for an execution still in flight, with the
    history so far)."""

    execution_id: str
    workflow: str
    status: Status  # the execution's, when its history was read
    calls_checked: int
    divergence: Divergence | None

    @property
    def consistent(self) -> bool:
        """Whether the code makes the recorded calls (as far as the history goes)."""
        return self.divergence is None

    def __str__(self) -> str:
        head = f"{self.execution_id} ({self.workflow}, {self.status.value})"
        if self.divergence is not None:
            return f"{head}: DIVERGES: {self.divergence}"
        so_far = " so far" if not self.status.is_final else ""
        calls = "1 call" if self.calls_checked == 1 else f"{self.calls_checked} calls"
        return f"{head}: consistent{so_far}, {calls} checked"


def replay(
    store: SqlStore,
    registry: Registry,
    execution_id: str,
    *,
    max_payload_bytes: int,
    max_history: int,
) -> ReplayReport:
    """See :meth:`Engine.replay <raftflow.engine.client.calls.ClientCalls.replay>`."""
    execution = store.get(execution_id)
    if execution is None:
        raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
    workflow = registry.workflow(execution.workflow)  # UnknownWorkflowError: another app's
    steps = store.steps(execution_id)

    async def run() -> ReplayReport:
        host = ReplayHost(
            registry,
            store.flows,
            HookChain(),
            max_payload_bytes=max_payload_bytes,
            max_history=max_history,
        )
        verdict = await replay_run(ReplayActivation(host, workflow, execution, steps))
        return ReplayReport(
            execution.id,
            execution.workflow,
            execution.status,
            verdict.calls_checked,
            verdict.divergence,
        )

    return asyncio.run(run())
