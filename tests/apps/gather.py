"""An async fan-out/fan-in over child workflows, for the multi-process tests. Worker
processes import this module: ``raftflow worker tests.apps.gather:engine --url ...``.

Each child waits for a message, then runs a step that appends one JSON line per run to
``<log_dir>/<pid>.jsonl``, so a test can count the runs of each child's step.
"""

from __future__ import annotations

import asyncio
import json
import os

from pydantic import BaseModel

from raftflow import Engine, current_step

engine = Engine()


class Member(BaseModel):
    log_dir: str
    n: int


class Fan(BaseModel):
    log_dir: str
    children: int


@engine.step
async def report(member: Member) -> int:
    line = {"execution": current_step().execution_id, "n": member.n}
    with open(os.path.join(member.log_dir, f"{os.getpid()}.jsonl"), "a") as log:
        log.write(json.dumps(line) + "\n")
    return member.n * 2


@engine.workflow
async def member(spec: Member) -> int:
    await engine.recv_async("go", timeout=300)
    return int(await report(spec))


@engine.workflow
async def fan_in(fan: Fan) -> list[int]:
    members = (Member(log_dir=fan.log_dir, n=i) for i in range(fan.children))
    handles = await asyncio.gather(*(engine.start_async(member, m) for m in members))
    return list(await asyncio.gather(*(h.result_async() for h in handles)))


def reports(log_dir: str) -> list[dict[str, object]]:
    found = []
    for name in sorted(os.listdir(log_dir)):
        if name.endswith(".jsonl"):
            with open(os.path.join(log_dir, name)) as file:
                found.extend(json.loads(line) for line in file if line.strip())
    return found
