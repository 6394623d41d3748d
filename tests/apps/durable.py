"""Workflows using the durable primitives, for the multi-process and chaos tests. Worker
processes import this module: ``raftflow worker tests.apps.durable:engine --url ...``.

Every step appends one JSON line per run to ``<log_dir>/<pid>.jsonl`` (as
``tests.apps.ordering`` does, with the attempt number), so tests can check that no
completed step ran again and when each ran.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from pydantic import BaseModel

from raftflow import Engine, Retry, current_step

engine = Engine()


class Plan(BaseModel):
    log_dir: str
    sleep: float = 3.0  # napper's sleep; the child's sleep in parent
    topic: str = "go"
    timeout: float = 120.0  # listener's recv timeout
    fail_times: int = 1  # flaky: attempts that fail before one succeeds


def _log(plan: Plan, label: str, **extra: Any) -> None:
    info = current_step()
    line = {
        "execution": info.execution_id,
        "index": info.index,
        "label": label,
        "attempt": info.attempt,
        "at": time.time(),
        "pid": os.getpid(),
        **extra,
    }
    with open(os.path.join(plan.log_dir, f"{os.getpid()}.jsonl"), "a") as log:
        log.write(json.dumps(line) + "\n")


@engine.step
def mark(plan: Plan, label: str) -> str:
    _log(plan, label)
    return label


@engine.step(retry=Retry(max_attempts=5, delay=2.0, backoff=1.0))
def flaky_step(plan: Plan) -> int:
    info = current_step()
    _log(plan, "flaky", failing=info.attempt <= plan.fail_times)
    if info.attempt <= plan.fail_times:
        raise ConnectionError(f"attempt {info.attempt} fails")
    return info.attempt


@engine.workflow
def napper(plan: Plan) -> str:
    mark(plan, "before")
    engine.sleep(plan.sleep)
    return mark(plan, "after")


@engine.workflow
def listener(plan: Plan) -> Any:
    mark(plan, "before")
    message = engine.recv(plan.topic, timeout=plan.timeout)
    mark(plan, f"got {message}")
    return message


@engine.workflow
def parent(plan: Plan) -> str:
    mark(plan, "before")
    child = engine.start(napper, plan)
    result = child.result()
    return mark(plan, f"child said {result}")


@engine.workflow
def flaky(plan: Plan) -> int:
    return flaky_step(plan)


def read_runs(log_dir: str) -> list[dict[str, Any]]:
    runs = []
    for name in sorted(os.listdir(log_dir)):
        if name.endswith(".jsonl"):
            with open(os.path.join(log_dir, name)) as file:
                runs.extend(json.loads(line) for line in file if line.strip())
    return sorted(runs, key=lambda r: r["at"])
