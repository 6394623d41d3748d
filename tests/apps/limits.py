"""Workflows under concurrency limits, for the multi-process tests. Worker processes import
this module: ``raftflow worker tests.apps.limits:engine --url ...``.

Every step logs its start and end as JSON lines in ``<log_dir>/<pid>.jsonl``, so tests can
check from the outside how many ran at once, in which order, and in which process.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from pydantic import BaseModel

from raftflow import Engine, RateLimit, current_step

engine = Engine()


class Job(BaseModel):
    log_dir: str
    customer: str = "a"
    n: int = 0
    work: float = 0.2  # seconds each of the two steps takes


def _log(job: Job, event: str) -> None:
    info = current_step()
    line = {
        "execution": info.execution_id,
        "customer": job.customer,
        "n": job.n,
        "step": info.index,
        "attempt": info.attempt,
        "event": event,
        "at": time.time(),
        "pid": os.getpid(),
        # How far this worker's cluster clock is ahead of this machine's.
        "skew": engine.store.database.clock.estimate() - time.time(),
    }
    with open(os.path.join(job.log_dir, f"{os.getpid()}.jsonl"), "a") as log:
        log.write(json.dumps(line) + "\n")


@engine.step
def work(job: Job) -> int:
    _log(job, "start")
    time.sleep(job.work)
    _log(job, "end")
    return job.n


@engine.step
async def awork(job: Job) -> int:
    _log(job, "start")
    await asyncio.sleep(job.work)
    _log(job, "end")
    return job.n


@engine.workflow(concurrency=2)
def capped(job: Job) -> int:
    work(job)
    return work(job)


@engine.workflow
def uncapped(job: Job) -> int:
    """``capped`` without the limit: what the limit costs is the difference."""
    work(job)
    return work(job)


@engine.workflow(concurrency=2)
async def acapped(job: Job) -> int:
    await awork(job)
    return await awork(job)


@engine.workflow(concurrency=1, concurrency_key=lambda job: job.customer)
def per_customer(job: Job) -> int:
    work(job)
    return work(job)


@engine.workflow(concurrency=1, concurrency_key=lambda job: job.customer)
async def aper_customer(job: Job) -> int:
    await awork(job)
    return await awork(job)


@engine.workflow(concurrency=1)
def holder(topic: str) -> Any:
    """Holds its slot, parked in a recv, until a message comes."""
    return engine.recv(topic, timeout=600)


@engine.step(rate_limit=RateLimit(10, per=1.0))
def ping(job: Job) -> int:
    _log(job, "start")
    return job.n


@engine.step(rate_limit=RateLimit(10, per=1.0, key=lambda job: job.customer))
async def aping(job: Job) -> int:
    _log(job, "start")
    return job.n


@engine.workflow
def rated(job: Job) -> int:
    return ping(job)


@engine.workflow
def unrated(job: Job) -> int:
    return work(job)


@engine.workflow
async def arated(job: Job) -> int:
    return await aping(job)


@engine.workflow
def debounced(job: Job) -> int:
    _log_run(job)
    return job.n


@engine.workflow
async def adebounced(job: Job) -> int:
    _log_run(job)
    return job.n


def _log_run(job: Job) -> None:
    line = {"run": job.n, "at": time.time(), "pid": os.getpid(), "event": "run"}
    with open(os.path.join(job.log_dir, f"{os.getpid()}.jsonl"), "a") as log:
        log.write(json.dumps(line) + "\n")


def runs(log_dir: str) -> list[dict[str, Any]]:
    """Every logged line of every worker process, in time order."""
    lines = []
    for name in os.listdir(log_dir):
        if name.endswith(".jsonl"):
            with open(os.path.join(log_dir, name)) as log:
                lines += [json.loads(line) for line in log if line.strip()]
    return sorted(lines, key=lambda line: line["at"])


def peak_overlap(lines: list[dict[str, Any]]) -> int:
    """The most executions inside a step at once, from the start/end lines."""
    inside: set[tuple[str, int, int]] = set()
    peak = 0
    for line in lines:
        key = (line["execution"], line["step"], line["attempt"])
        if line["event"] == "start":
            inside.add(key)
            peak = max(peak, len({k[0] for k in inside}))
        else:
            inside.discard(key)
    return peak
