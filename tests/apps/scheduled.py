"""A scheduled workflow for the schedule tests: every second, cluster-wide. Worker
processes import it: ``raftflow worker tests.apps.scheduled:engine --url ...``.

Its step appends one JSON line per run to ``$RAFTFLOW_TEST_FIRES/<pid>.jsonl`` (execution,
fire time, pid): each fire as the workflow saw it, written outside the engine.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from raftflow import Engine, current_step

engine = Engine()

#: The environment variable naming the folder of the fire logs.
FIRES = "RAFTFLOW_TEST_FIRES"


@engine.step
def stamp(at: str) -> str:
    line = {"execution": current_step().execution_id, "at": at, "pid": os.getpid()}
    with open(Path(os.environ[FIRES]) / f"{os.getpid()}.jsonl", "a") as log:
        log.write(json.dumps(line) + "\n")
    return at


@engine.scheduled("* * * * * *", catch_up=100)
@engine.workflow
def tick(at: datetime) -> str:
    return stamp(at.isoformat())


def fires_seen(log_dir: Path) -> dict[str, set[str]]:
    """Per fire time (ISO), the executions whose step ran with it, from the fire logs."""
    seen: dict[str, set[str]] = defaultdict(set)
    for path in sorted(log_dir.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                run = json.loads(line)
                seen[run["at"]].add(run["execution"])
    return seen
