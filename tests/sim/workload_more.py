"""The workload's kinds for the engine's other features (checked in
tests/sim/invariants_more.py):

- ``timed``/``stimed``: a workflow ``timeout`` (async, sync): steps and short sleeps that
  may outlast it; a timeout cancels no earlier than its deadline.
- ``stepcut``/``sstepcut``: a step ``timeout`` (async; sync, in the overrun pool) shorter
  than some of its runs: an attempt is cut no earlier than its timeout, one that ended in
  time is never recorded as cut.
- ``looper``/``slooper``: ``continue_as_new`` 1-3 times: the runs chain.
- ``debounced``: started 2-4 times under one id with ``debounce``: it runs once, with the
  last input started before it ran, and no earlier than the debounce after that start.
- ``fragile``: its last step fails until the client "deploys a fix", then resumes it: the
  failed step runs again, the earlier ones are replayed; ``forked``: the same, forked
  from the failed step into a new execution instead.
- ``tick``: a cron schedule (in some seeds): each time fires once, none is skipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from raftflow import current_step
from tests.sim.workload import CURRENT, Chain, engine, work
from tests.sim.workload_sync import _run, swork

#: The timed kinds' workflow timeout, the cut steps' step timeout, the debounce (seconds).
WORKFLOW_TIMEOUT = 2.0
STEP_TIMEOUT = 0.4
DEBOUNCE = 1.0
#: The cron schedule of ``tick`` (every 3 s), and the suffix of a fork's execution id.
CRON = "*/3 * * * * *"
FORK = "-fork"


@engine.workflow(timeout=WORKFLOW_TIMEOUT)
async def timed(spec: Chain) -> list[int]:
    done = []
    for _ in range(spec.steps):
        done.append(await work())
        await engine.sleep_async(0.2)
    return done


@engine.workflow(timeout=WORKFLOW_TIMEOUT)
def stimed(spec: Chain) -> list[int]:
    done = []
    for _ in range(spec.steps):
        done.append(swork())
        engine.sleep(0.2)
    return done


@engine.step(timeout=STEP_TIMEOUT)
async def cut() -> int:
    return await CURRENT[-1].runs.run()


@engine.step(timeout=STEP_TIMEOUT)
def scut() -> int:
    return _run()


@engine.workflow
async def stepcut(spec: Chain) -> list[Any]:
    done: list[Any] = []
    for _ in range(spec.steps):
        try:
            done.append(await cut())
        except Exception as exc:  # a StepError: the attempt was cut
            done.append(type(exc).__name__)
    return done


@engine.workflow
def sstepcut(spec: Chain) -> list[Any]:
    done: list[Any] = []
    for _ in range(spec.steps):
        try:
            done.append(scut())
        except Exception as exc:
            done.append(type(exc).__name__)
    return done


class Loop(BaseModel):
    left: int
    run: int = 1


@engine.workflow
async def looper(spec: Loop) -> int:
    await work()
    if spec.left > 0:
        engine.continue_as_new(Loop(left=spec.left - 1, run=spec.run + 1))
    return spec.run


@engine.workflow
def slooper(spec: Loop) -> int:
    swork()
    if spec.left > 0:
        engine.continue_as_new(Loop(left=spec.left - 1, run=spec.run + 1))
    return spec.run


class Bounce(BaseModel):
    value: int


@engine.workflow
async def debounced(spec: Bounce) -> list[int]:
    return [spec.value, await work()]


@engine.step
async def brittle() -> int:
    """Fails until the client fixed its execution (or the execution it was forked from)."""
    sim = CURRENT[-1]
    source = current_step().execution_id.removesuffix(FORK)
    return await sim.runs.run(fail=source not in sim.fixed)


@engine.workflow
async def fragile(spec: Chain) -> list[int]:
    done = [await work() for _ in range(spec.steps)]
    return [*done, await brittle()]


@engine.step
async def fired(at: str) -> int:
    sim = CURRENT[-1]
    sim.fires.append((at, current_step().execution_id))
    return await sim.runs.run(short=True)


@engine.scheduled(CRON, catch_up=1000)
@engine.workflow
async def tick(at: datetime) -> int:
    return await fired(at.isoformat())


#: The kinds of this module (``forked`` runs ``fragile``), and their inputs' shapes.
KINDS = {
    "timed": "chain",
    "stimed": "chain",
    "stepcut": "chain",
    "sstepcut": "chain",
    "looper": "loop",
    "slooper": "loop",
    "debounced": "bounce",
    "fragile": "chain",
    "forked": "chain",
}
#: The workflow each kind starts.
WORKFLOWS = {"forked": "fragile"}
