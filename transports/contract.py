"""The transport contract: a lease-based queue of events, FIFO and exclusive per group.

A *group* (the engine uses one per execution) has at most one leased message at a time,
across all workers; messages of a group are delivered in publish order; groups are
served round-robin, among the groups of the *lanes* a claim names (all when it names
none; a group's lane, like its priority, is set by its first message). A :class:`Lease`
is settled exactly once, by ``ack`` (done, deleted) or ``nack`` (retry now, or park for
``delay`` seconds). A lease not settled before its deadline lapses and the message is
delivered again (at-least-once delivery).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raftflow.transports.db.clock import Clock

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from raftflow.transports.lanes import Lanes

#: ``locked_by`` of a parked message: it blocks its group until its deadline.
PARKED = "__parked__"


@dataclass(frozen=True, slots=True)
class Lease:
    """One leased message. ``token`` proves the lease; ``expires_at`` is its deadline."""

    seq: int
    group_id: str
    event: Any
    token: str
    expires_at: float = 0.0
    attempts: int = 1
    origin: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class QueueStats:
    messages: int
    leased: int
    parked: int
    groups: int


@runtime_checkable
class Transport(Protocol):
    """The queue as the spec draws it (sync): publish, claim, settle, extend."""

    def publish(
        self,
        group_id: str,
        event: Any,
        priority: int = 0,
        *,
        key: str | None = None,
        lane: str | None = None,
    ) -> None:
        """Append ``event`` to ``group_id`` (idempotent by ``key``; ``lane`` and
        ``priority`` are the group's, set by its first message)."""
        ...

    def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0, *, lanes: Lanes = None
    ) -> Lease | None:
        """Lease the oldest message of the next group (round-robin) of ``lanes`` (None:
        any), or None."""
        ...

    def claim_many(
        self,
        worker_id: str,
        visibility: float,
        limit: int,
        min_priority: int = 0,
        *,
        lanes: Lanes = None,
    ) -> list[Lease]:
        """Lease the heads of up to ``limit`` groups in one statement."""
        ...

    def claimable(self, min_priority: int = 0, *, lanes: Lanes = None) -> bool:
        """Whether a claim would find a message now (a read)."""
        ...

    def ack(self, lease: Lease) -> None:
        """Done: delete the leased message."""
        ...

    def nack(self, lease: Lease, delay: float = 0) -> None:
        """Give the message back: at once, or parked for ``delay`` seconds."""
        ...

    def extend(self, lease: Lease, visibility: float) -> Lease:
        """Push the lease's deadline (a heartbeat)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncTransport(Protocol):
    """The async twin of :class:`Transport`, and what a worker needs of the queue: leases
    that its store's commits settle (claimed with the store's reads, then extended, given
    back or acked in batches)."""

    @property
    def clock(self) -> Clock:
        """The clock leases and wake times are measured by."""
        ...

    async def publish(
        self,
        group_id: str,
        event: Any,
        priority: int = 0,
        *,
        key: str | None = None,
        lane: str | None = None,
    ) -> None: ...

    async def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0, *, lanes: Lanes = None
    ) -> Lease | None: ...

    async def claim_many(
        self,
        worker_id: str,
        visibility: float,
        limit: int,
        min_priority: int = 0,
        *,
        lanes: Lanes = None,
    ) -> list[Lease]: ...

    async def claimable(self, min_priority: int = 0, *, lanes: Lanes = None) -> bool: ...

    async def ack(self, lease: Lease) -> None: ...

    async def nack(self, lease: Lease, delay: float = 0) -> None: ...

    async def extend(self, lease: Lease, visibility: float) -> Lease: ...

    async def extend_leases(self, leases: Sequence[Lease], visibility: float) -> list[Lease | None]:
        """Renew several leases in one request; None for each one that was lost."""
        ...

    async def release_leases(self, leases: Sequence[Lease], delay: float = 0.0) -> None:
        """Give leases back: claimable at once, or parked for ``delay`` seconds."""
        ...

    async def release_group(self, group_id: str, token: str, delay: float = 0.0) -> None:
        """Give back whatever message of ``group_id`` ``token`` holds (a hand-back)."""
        ...

    async def ack_leases(self, leases: Sequence[Lease]) -> None:
        """Delete events that have nothing to run."""
        ...

    async def close(self) -> None: ...
