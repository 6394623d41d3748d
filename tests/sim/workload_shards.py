"""The workflow of the sharded seeds (tests/sim/shards.py): what crosses clusters.

``faraway`` starts a child with an explicit id that routes to another cluster (noted on its
own cluster, started on the child's; the child's outcome comes back through the outbox and
the relay) and, when given a ``peer``, first sends a message to that execution, a listener
on another cluster (one request there, then the send's record here).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tests.sim.workload import Chain, chain, engine, work


class Faraway(BaseModel):
    steps: int
    child: str
    peer: str | None = None


def peer_message(peer: str) -> str:
    """What ``faraway`` sends to its peer (the peer's listener returns it)."""
    return f"{peer}-m0"


@engine.workflow
async def faraway(spec: Faraway) -> list[Any]:
    first = await work()
    if spec.peer is not None:
        await engine.send_async(spec.peer, peer_message(spec.peer), topic="m")
    child = await engine.start_async(chain, Chain(steps=spec.steps), execution_id=spec.child)
    result = await child.result_async()
    return [first, result, await work()]
