"""Workflows for the engine's multi-process tests. Worker processes import this module:
``python -m raftflow.engine.ops.cli worker tests.apps.ordering:engine --url ...``.

Every step appends one JSON line per run to ``<log_dir>/<pid>.jsonl``: (execution, index,
start, end, pid). The tests read those logs to check order, overlap and re-runs.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections import defaultdict
from collections.abc import Collection
from typing import Any

from pydantic import BaseModel

from raftflow import Engine, current_step

engine = Engine()


class Spec(BaseModel):
    log_dir: str
    steps: int = 5
    sleep: float = 0.005
    # Fault hooks: the step at `block_at` writes `<log_dir>/blocked-<execution>` with its
    # pid and sleeps `block_for` seconds -- only on its first run (a marker file says).
    block_at: int | None = None
    block_for: float = 0.0


def _log(spec: Spec, index: int, start: float, end: float) -> None:
    info = current_step()
    assert info is not None and info.index == index
    line = {
        "execution": info.execution_id,
        "index": index,
        "start": start,
        "end": end,
        "pid": os.getpid(),
    }
    with open(os.path.join(spec.log_dir, f"{os.getpid()}.jsonl"), "a") as log:
        log.write(json.dumps(line) + "\n")


def _maybe_block(spec: Spec, index: int) -> float:
    info = current_step()
    assert info is not None
    if spec.block_at != index:
        return spec.sleep
    marker = os.path.join(spec.log_dir, f"blocked-{info.execution_id}")
    try:
        with open(marker, "x") as file:  # only the first run blocks
            file.write(str(os.getpid()))
    except FileExistsError:
        return spec.sleep
    return spec.block_for


@engine.step
def numbered(spec: Spec, index: int) -> int:
    start = time.time()
    time.sleep(_maybe_block(spec, index))
    _log(spec, index, start, time.time())
    return index * index


@engine.step
async def anumbered(spec: Spec, index: int) -> int:
    start = time.time()
    await asyncio.sleep(_maybe_block(spec, index))
    _log(spec, index, start, time.time())
    return index * index


@engine.workflow
def sequence(spec: Spec) -> list[int]:
    return [numbered(spec, i) for i in range(spec.steps)]


#: The named queue of the async twin (the chaos suite's workers serving one queue each).
ASYNC_QUEUE = "async"


@engine.workflow(queue=ASYNC_QUEUE)
async def asequence(spec: Spec) -> list[int]:
    return [await anumbered(spec, i) for i in range(spec.steps)]


def expected(spec: Spec) -> list[int]:
    return [i * i for i in range(spec.steps)]


def read_logs(log_dir: str) -> list[dict[str, Any]]:
    runs = []
    for name in sorted(os.listdir(log_dir)):
        if name.endswith(".jsonl"):
            with open(os.path.join(log_dir, name)) as file:
                runs.extend(json.loads(line) for line in file if line.strip())
    return runs


def runs_by_execution(log_dir: str) -> dict[str, list[dict[str, Any]]]:
    """The step runs of the logs in ``log_dir``, per execution, in start order."""
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in read_logs(log_dir):
        runs[run["execution"]].append(run)
    for execution_runs in runs.values():
        execution_runs.sort(key=lambda r: r["start"])
    return runs


def assert_serial(runs: list[dict[str, Any]], *, excused_pids: Collection[int] = ()) -> None:
    """Runs of one execution never overlap, except with a run of a killed/fenced worker."""
    counted = [r for r in runs if r["pid"] not in excused_pids]
    for before, after in itertools.pairwise(counted):
        assert before["end"] <= after["start"], f"overlapping step runs: {before} {after}"


def assert_ran_in_order_across_processes(
    engine: Engine, handles: list[Any], log_dir: str, steps: int
) -> None:
    """Each execution's ``steps`` steps ran once each, in order, one at a time, and were
    recorded so; the work spread over at least two worker processes; the queue is empty."""
    runs = runs_by_execution(log_dir)
    pids = set()
    indexes = list(range(steps))
    for handle in handles:
        execution_runs = runs[handle.id]
        assert [r["index"] for r in execution_runs] == indexes  # once each, in order
        assert_serial(execution_runs)
        assert [s.idx for s in handle.steps()] == indexes
        pids.update(r["pid"] for r in execution_runs)
    assert len(pids) >= 2, "the work should spread over the worker processes"
    stats = engine.transport.stats()
    assert (stats.messages, stats.groups) == (0, 0)
