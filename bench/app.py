"""The workflows the benchmark's raftflow workers run (``bench.app:engine``).

``chain`` runs ``steps`` steps one after another; a step does nothing (or sleeps
``sleep`` seconds), so what is measured is raftflow's own cost per step. ``chain_sync``
is the same with a sync workflow and sync steps (run in the worker's thread pool).
``one`` is the 1-step workflow of the end-to-end latency phase.
"""

from __future__ import annotations

import asyncio
import time

from pydantic import BaseModel
from raftflow.engine import Engine

engine = Engine()


class Chain(BaseModel):
    steps: int
    sleep: float = 0.0


@engine.step
async def tick(index: int, sleep: float) -> int:
    if sleep > 0:
        await asyncio.sleep(sleep)
    return index


@engine.step
def tick_sync(index: int, sleep: float) -> int:
    if sleep > 0:
        time.sleep(sleep)
    return index


@engine.workflow
async def chain(spec: Chain) -> int:
    total = 0
    for i in range(spec.steps):
        total += await tick(i, spec.sleep)
    return total


@engine.workflow
def chain_sync(spec: Chain) -> int:
    return sum(tick_sync(i, spec.sleep) for i in range(spec.steps))


@engine.workflow
async def one(value: int) -> int:
    return await tick(value, 0.0)
