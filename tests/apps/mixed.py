"""Workflows mixing the durable primitives, for the chaos scenario
``tests/chaos/test_primitives.py``. Worker processes import this module:
``raftflow worker tests.apps.mixed:engine --url ...``.

Every step run appends one JSON line to ``<log_dir>/<pid>.jsonl`` (execution, index,
label, attempt, start, end, pid): the checker compares what ran with what was recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from pydantic import BaseModel

from raftflow import Engine, Retry, current_step

engine = Engine()

RETRY_DELAY = 1.0


class Job(BaseModel):
    log_dir: str
    work: float = 0.15  # each step's duration
    sleep: float = 2.0  # napper: its durable sleep
    messages: int = 0  # listener: how many messages it receives, in order
    topic: str = "go"
    children: int = 0  # parent: how many nappers it starts and waits for
    child_sleep: float = 2.0
    fail_times: int = 0  # flaky: attempts that fail before one succeeds


def _log(job: Job, label: str, start: float) -> None:
    info = current_step()
    line = {
        "execution": info.execution_id,
        "index": info.index,
        "label": label,
        "attempt": info.attempt,
        "start": start,
        "end": time.time(),
        "pid": os.getpid(),
    }
    with open(os.path.join(job.log_dir, f"{os.getpid()}.jsonl"), "a") as log:
        log.write(json.dumps(line) + "\n")


@engine.step
def mark(job: Job, label: str) -> str:
    start = time.time()
    time.sleep(job.work)
    _log(job, label, start)
    return label


@engine.step
async def amark(job: Job, label: str) -> str:
    start = time.time()
    await asyncio.sleep(job.work)
    _log(job, label, start)
    return label


@engine.step(retry=Retry(max_attempts=4, delay=RETRY_DELAY, backoff=1.0))
def flaky_step(job: Job) -> int:
    start = time.time()
    attempt = current_step().attempt
    time.sleep(job.work)
    _log(job, f"attempt {attempt}", start)
    if attempt <= job.fail_times:
        raise ConnectionError(f"attempt {attempt} fails")
    return attempt


@engine.workflow
def napper(job: Job) -> str:
    mark(job, "before")
    engine.sleep(job.sleep)
    return mark(job, "after")


@engine.workflow
async def anapper(job: Job) -> str:
    await amark(job, "before")
    await engine.sleep_async(job.sleep)
    return await amark(job, "after")


@engine.workflow
def listener(job: Job) -> list[Any]:
    mark(job, "before")
    got = [engine.recv(job.topic, timeout=None) for _ in range(job.messages)]
    mark(job, "after")
    return got


@engine.workflow
async def alistener(job: Job) -> list[Any]:
    await amark(job, "before")
    got = [await engine.recv_async(job.topic, timeout=None) for _ in range(job.messages)]
    await amark(job, "after")
    return got


@engine.workflow
def parent(job: Job) -> list[str]:
    mark(job, "before")
    child_job = job.model_copy(update={"sleep": job.child_sleep, "children": 0})
    handles = [engine.start(napper, child_job) for _ in range(job.children)]
    results = [handle.result() for handle in handles]
    mark(job, "after")
    return results


@engine.workflow
def flaky(job: Job) -> int:
    mark(job, "before")
    attempts = flaky_step(job)
    mark(job, "after")
    return attempts


def expected(workflow: str, job: Job) -> Any:
    """The output an execution of ``workflow`` with ``job`` succeeds with."""
    if workflow in ("napper", "anapper"):
        return "after"
    if workflow in ("listener", "alistener"):
        return list(range(job.messages))
    if workflow == "parent":
        return ["after"] * job.children
    if workflow == "flaky":
        return job.fail_times + 1
    raise ValueError(workflow)


def read_runs(log_dir: str) -> list[dict[str, Any]]:
    """Every step run logged under ``log_dir``, in start order."""
    runs = []
    for name in sorted(os.listdir(log_dir)):
        if name.endswith(".jsonl"):
            with open(os.path.join(log_dir, name)) as file:
                runs.extend(json.loads(line) for line in file if line.strip())
    return sorted(runs, key=lambda r: r["start"])
