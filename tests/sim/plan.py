"""A seed's plan: its faults, its workers and their options, its executions and when the
client starts, signals and cancels them, when workers are killed, stopped or see their clock
jump -- all drawn from the seed's RNG before anything runs (tests/sim/sim.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any

from raftflow.engine.runtime.worker import WorkerOptions

from tests.sim import workload
from tests.sim.cluster import Faults
from tests.sim.workload_more import KINDS as MORE
from tests.sim.workload_sync import SHAPES


@dataclass
class Planned:
    id: str
    workflow: str  # its kind (the workflow it runs: workload_more.WORKFLOWS, else this)
    input: Any
    at: float  # when the client starts it
    cancel_at: float | None = None
    messages: int = 0
    #: When the client starts it, with which input: once, or several times (debounced).
    starts: list[tuple[float, Any]] = field(default_factory=list)
    #: The worker whose process starts it (Engine.start's fast path), if not the client.
    via: int | None = None
    #: Each start done: when it was called and acknowledged, its input, the starter's
    #: clock reference then (tests/sim/timers.py), the starting process.
    started: list[tuple[float, float, Any, float | None, str]] = field(default_factory=list)
    recovered_at: float | None = None  # when the client resumed or forked it


@dataclass
class Plan:
    faults: Faults
    workers: int
    options: list[WorkerOptions]
    executions: list[Planned]
    step_time: float
    kills: list[tuple[float, int]]  # (when, worker index): kill -9, and a replacement
    pauses: list[tuple[float, int, float]]  # (when, worker index, how long): SIGSTOP/SIGCONT
    clock_skews: list[float]  # each worker's local clock offset (only differences matter)
    calm_at: float  # from then on the network is faultless (so everything can finish)
    #: (when, worker index, by how much): that worker's local clock jumps (an operator, a
    #: broken NTP step, a VM resumed); the cluster clock's local time source jumps with it.
    clock_jumps: list[tuple[float, int, float]] = field(default_factory=list)
    cron: bool = False  # whether the workers register the ``tick`` schedule


def make_plan(rng: random.Random, size: int) -> Plan:
    faults = Faults.draw(rng)
    if rng.random() < 0.2:
        faults.clock_jump = rng.choice((1.0, 5.0))
    workers = rng.randint(1, 3)
    visibility = rng.choice((1.0, 2.0, 5.0, 30.0))
    options = [
        WorkerOptions(
            worker_id=f"w{i}",
            concurrency=rng.randint(1, 4),
            visibility=visibility,
            steps_per_turn=rng.choice((1, 2, 16)),
            sticky_cache=rng.choice((0, 256)),
            poll_interval=0.01,
            max_poll_interval=rng.choice((0.25, 1.0)),
            retry_delay=0.2,
            max_batch=rng.choice((1, 64)),
        )
        for i in range(workers + 4)  # the replacements of killed workers too
    ]
    # Turns past steps_per_turn go on while nothing waits (the default), except with 2,
    # which hands them back anyway: both kinds run, and no draw is added to the plan.
    options = [replace(o, yield_idle_turns=o.steps_per_turn == 2) for o in options]
    executions: list[Planned] = []
    horizon = rng.uniform(0.5, 6.0)
    kinds = (
        *("chain", "chain", "retried", "doomed", "napper", "listener", "parent"),
        *("banker", "limited", "throttled"),
        *SHAPES,  # the sync twins
        *MORE,  # timeouts, continue_as_new, debounce, resume, fork
    )
    for i in range(size):
        kind = rng.choice(kinds)
        shape = SHAPES.get(kind, MORE.get(kind, kind))
        steps = rng.randint(1, 4)
        item = Planned(f"e{i}", kind, {"steps": steps}, rng.uniform(0.0, horizon))
        if shape == "loop":
            item.input = {"left": rng.randint(1, 3)}
        elif shape == "bounce":
            item.input = {"value": 0}
            item.starts = [(item.at, item.input)]
            for k in range(1, rng.randint(2, 4)):  # 0.2-1.5 s apart: most fold, some not
                at = item.starts[-1][0] + rng.uniform(0.2, 1.5)
                item.starts.append((at, {"value": k}))
        elif shape == "napper":
            item.input = {"seconds": rng.choice((0.3, 2.0, 7.0))}
        elif shape == "banker":
            item.input = {"deposits": [rng.randint(1, 100) for _ in range(steps)]}
        elif kind == "limited":
            item.input = {"key": rng.choice(("k0", "k1")), "steps": steps}
        elif shape == "listener":
            item.messages = rng.randint(1, 3)
            item.input = {"messages": item.messages}
        if kind != "doomed" and kind not in MORE and rng.random() < 0.2:
            item.cancel_at = item.at + rng.uniform(0.0, 4.0)  # it races the work, signals
        if not item.starts:
            item.starts = [(item.at, item.input)]
        if shape != "bounce" and kind != "limited" and rng.random() < 0.3:
            item.via = rng.randrange(workers)  # started in a worker's process
        executions.append(item)
    kills = [
        (rng.uniform(0.5, horizon + 4), rng.randrange(workers)) for _ in range(rng.randint(0, 1))
    ]
    pauses = [
        (rng.uniform(0.5, horizon + 4), rng.randrange(workers), rng.uniform(0.5, 3 * visibility))
        for _ in range(rng.randint(0, 2))
    ]
    skews = [rng.uniform(-600, 600) for _ in options]
    jumps = []
    if rng.random() < 0.15:
        jumps.append(
            (
                rng.uniform(0.5, horizon + 4),
                rng.randrange(workers),
                rng.choice((-1, 1)) * rng.uniform(60, 300),
            )
        )
    cron = rng.random() < 0.25
    return Plan(
        faults,
        workers,
        options,
        executions,
        step_time=rng.choice((0.05, 0.3, 1.5)),
        kills=kills,
        pauses=pauses,
        clock_skews=skews,
        clock_jumps=jumps,
        calm_at=horizon + rng.uniform(5.0, 20.0),
        cron=cron,
    )


def serve_queues(plan: Plan, seed: int) -> Plan:
    """In some seeds, the first workers but one serve one named queue each (the others,
    and every replacement of a killed worker, serve all, so every execution can finish):
    claims filtered by what a worker serves, under the same faults. Drawn from an RNG of
    its own, so the other seeds' plans and traces stay as they were."""
    rng = random.Random(f"queues-{seed}")
    if plan.workers < 2 or rng.random() >= 0.3:
        return plan
    options = list(plan.options)
    for index in range(1, plan.workers):
        options[index] = replace(options[index], queues=(rng.choice(("default", workload.WAITS)),))
    return replace(plan, options=options)
