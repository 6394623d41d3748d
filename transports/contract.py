"""The transport contract: a lease-based queue of events, FIFO and exclusive per group.

A *group* (the engine uses one per execution) has at most one leased message at a time,
across all workers; messages of a group are delivered in publish order; groups are
served round-robin. A :class:`Lease` is settled exactly once, by ``ack`` (done, deleted)
or ``nack`` (retry now, or park for ``delay`` seconds). A lease not settled before its
deadline lapses and the message is delivered again (at-least-once delivery).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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
    def publish(
        self, group_id: str, event: Any, priority: int = 0, *, key: str | None = None
    ) -> None: ...

    def claim(self, worker_id: str, visibility: float, min_priority: int = 0) -> Lease | None: ...

    def claim_many(
        self, worker_id: str, visibility: float, limit: int, min_priority: int = 0
    ) -> list[Lease]: ...

    def ack(self, lease: Lease) -> None: ...

    def nack(self, lease: Lease, delay: float = 0) -> None: ...

    def extend(self, lease: Lease, visibility: float) -> Lease: ...

    def close(self) -> None: ...


@runtime_checkable
class AsyncTransport(Protocol):
    async def publish(
        self, group_id: str, event: Any, priority: int = 0, *, key: str | None = None
    ) -> None: ...

    async def claim(
        self, worker_id: str, visibility: float, min_priority: int = 0
    ) -> Lease | None: ...

    async def claim_many(
        self, worker_id: str, visibility: float, limit: int, min_priority: int = 0
    ) -> list[Lease]: ...

    async def ack(self, lease: Lease) -> None: ...

    async def nack(self, lease: Lease, delay: float = 0) -> None: ...

    async def extend(self, lease: Lease, visibility: float) -> Lease: ...

    async def close(self) -> None: ...
