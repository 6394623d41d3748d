"""What a run of workflow code needs from the worker that hosts it, and nothing more.

The workflow core never imports the worker runtime: an :class:`~raftflow.engine.workflow.
activation.Activation` asks its :class:`Host` to send a commit, run a store flow, read the
cluster's clock or decide whether its turn goes on. The worker's implementation is
:class:`~raftflow.engine.runtime.host.RunHost`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from raftflow.engine.runtime.hooks import HookChain
    from raftflow.engine.workflow.registry import Registry
    from raftflow.stores.commit import Commit, CommitOutcome
    from raftflow.stores.flows import StoreFlows
    from raftflow.stores.records import Status
    from raftflow.transports.db.flow import Flow

T = TypeVar("T")


class Host(Protocol):
    """What an activation needs from the worker that runs it."""

    loop: asyncio.AbstractEventLoop
    worker_id: str
    max_payload_bytes: int
    hooks: HookChain
    flows: StoreFlows  # the store's, for the durable calls' flows
    registry: Registry
    max_history: int

    async def commit(self, commit: Commit) -> CommitOutcome: ...

    async def run_flow(self, flow: Flow[T], route: str | None = None) -> T:
        """Run ``flow`` on this execution's cluster, or (sharded) on ``route``'s."""
        ...

    def holds_here(self, execution_id: str) -> bool:
        """Whether ``execution_id`` lives on this execution's cluster (always, unsharded)."""
        ...

    def same_cluster(self, one: str, other: str) -> bool:
        """Whether two ids live on one cluster (always, unsharded)."""
        ...

    def clock_estimate(self) -> float: ...

    def clock_uncertainty(self) -> float:
        """How far the cluster's clock may be from its last sync's reading, either way."""
        ...

    def clock_earliest(self) -> float:
        """A time the cluster's clock has surely reached (without I/O)."""
        ...

    def short_wait(self) -> float:
        """The longest wait a run pauses for in place (longer ones park its next event)."""
        ...

    def keep_turn(self, turn_steps: int) -> bool:
        """Whether a run that committed ``turn_steps`` steps since its claim goes on."""
        ...

    def finished(self, execution_id: str, status: Status, parent_id: str | None = None) -> None:
        """Its outcome was committed (``parent_id``: the execution's parent, if any)."""
        ...

    @property
    def sticky(self) -> bool:
        """Whether runs may wait suspended for their next turn (a continuation cache)."""
        ...
