"""What must hold after every chaos scenario, checked once its workload is done.

1. Every started execution reached its correct final state: succeeded, with the output
   its input determines, and no execution exists that was not started.
2. Per execution the step records are complete and in order (0..n-1, the right step name
   and output), each recorded by a worker that did run that step (its own log says so).
3. Each step ran once as its own code saw it (its log, written by the step, outside the
   engine): runs beyond one are runs of workers the scenario killed or stalled, or whose
   commit for that execution failed or was refused (their logs say so) -- the at-least-once
   re-runs the model allows, and no others.
4. Step runs (the steps' own logs, one line per run) are in index order and never overlap,
   except runs of workers the scenario killed or stalled and runs whose worker was fenced
   (its log says its commit for that execution was refused).
5. No message is left leased forever: once everything finished the queue is empty.
6. No orphan rows: no ``groups`` row without messages, no message or step of an execution
   that does not exist.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.apps import ordering
from tests.apps.ordering import Spec
from tests.chaos.db import Db

#: The step each workflow of tests.apps.ordering calls.
STEP_NAMES = {"sequence": "numbered", "asequence": "anumbered"}

# A worker's log line saying its commit or lease for an execution was refused, or that it
# handed the execution back after a failure (its work since the last commit runs again).
# Loose on purpose: the wording belongs to the engine and may change.
_FENCED = re.compile(
    r"execution (\S+): .*(not recorded|lease lost|lease will lapse|handing it back)"
)


@dataclass(frozen=True)
class Started:
    workflow: str
    spec: Spec


@dataclass(frozen=True)
class Tally:
    executions: int
    steps: int
    step_runs: int
    reruns: int  # runs beyond the first of a step
    excused_runs: int  # runs of killed, stalled or fenced workers


def fenced_executions(worker_log: Path) -> set[str]:
    """Executions whose commit (or lease) the worker writing ``worker_log`` was refused."""
    try:
        text = worker_log.read_text(errors="replace")
    except FileNotFoundError:
        return set()
    return {match.group(1) for match in _FENCED.finditer(text)}


def runs_beyond_one(
    execution_id: str,
    runs: list[dict[str, Any]],
    fenced: Collection[tuple[int, str]],
    key: tuple[str, ...] = ("index",),
) -> list[str]:
    """The steps of ``execution_id`` that ran more than once as their code saw it: ``runs``
    (its steps' log lines, the killed or stalled workers' left out) counted per ``key``
    (a step's index; with the attempt for retried steps, whose each attempt runs), but
    for the runs of workers whose commit for the execution failed or was refused."""
    counted: dict[tuple[Any, ...], list[int]] = {}
    for run in runs:
        if (run["pid"], execution_id) not in fenced:
            counted.setdefault(tuple(run[k] for k in key), []).append(run["pid"])
    return [
        f"step {execution_id}/{'/'.join(map(str, which))} ran {len(pids)} times as its code "
        f"saw it (pids {pids}; none killed, stalled, fenced or handing the execution back)"
        for which, pids in counted.items()
        if len(pids) > 1
    ]


def check(
    db: Db,
    started: Mapping[str, Started],
    log_dir: Path,
    *,
    worker_pids: Mapping[str, int],
    excused_pids: Collection[int] = (),
    fenced: Collection[tuple[int, str]] = (),
) -> Tally:
    """Check every invariant; raise one AssertionError listing every violation.

    ``worker_pids`` maps worker ids to pids, ``excused_pids`` are workers the scenario
    killed or stalled, ``fenced`` (pid, execution) pairs whose commits were refused.
    """
    problems: list[str] = []
    # steps_done is counted (migration 3: a step within a turn does not touch the row).
    executions = {
        r["id"]: r
        for r in db.query(
            "SELECT *, (SELECT COUNT(*) FROM steps AS s WHERE s.execution_id = executions.id "
            "AND s.status IN ('succeeded', 'failed')) AS steps_done FROM executions"
        )
    }
    steps = db.query("SELECT * FROM steps ORDER BY execution_id, idx")
    runs = ordering.runs_by_execution(str(log_dir))

    # 1. final states
    for missing in sorted(set(started) - set(executions)):
        problems.append(f"execution {missing} was started but does not exist")
    for extra in sorted(set(executions) - set(started)):
        problems.append(f"execution {extra} exists but was never started")
    for execution_id, start in started.items():
        row = executions.get(execution_id)
        if row is None:
            continue
        expected = ordering.expected(start.spec)
        output = None if row["output"] is None else json.loads(row["output"])
        if row["status"] != "succeeded" or output != expected:
            problems.append(
                f"execution {execution_id}: {row['status']} with output {output} "
                f"(expected succeeded with {expected}); error: {row['error']}"
            )
        if row["steps_done"] != start.spec.steps:
            problems.append(f"execution {execution_id}: steps_done {row['steps_done']}")

    # 2. step records
    records: dict[str, list[dict[str, Any]]] = {}
    for step in steps:
        records.setdefault(step["execution_id"], []).append(step)
    ran_by = {(r["execution"], r["index"], r["pid"]) for rs in runs.values() for r in rs}
    for execution_id, start in started.items():
        rows = records.get(execution_id, [])
        name = STEP_NAMES[start.workflow]
        if [s["idx"] for s in rows] != list(range(start.spec.steps)):
            problems.append(f"execution {execution_id}: steps {[s['idx'] for s in rows]}")
        for s in rows:
            output = None if s["output"] is None else json.loads(s["output"])
            if s["name"] != name or s["status"] != "succeeded" or output != s["idx"] ** 2:
                problems.append(f"execution {execution_id}: bad step record {s}")
    for s in steps:
        step = f"step {s['execution_id']}/{s['idx']}"
        pid = worker_pids.get(s["worker_id"])
        if pid is None:
            problems.append(f"{step} recorded by unknown worker {s['worker_id']}")
        elif (s["execution_id"], s["idx"], pid) not in ran_by:
            problems.append(
                f"{step} recorded by {s['worker_id']} (pid {pid}), which has no run of it"
            )
    for orphan in sorted(set(records) - set(executions)):
        problems.append(f"steps of execution {orphan}, which does not exist")

    # 3. each step ran once, but for the excused re-runs
    excused_pids = set(excused_pids)
    fenced = set(fenced)
    for execution_id, execution_runs in runs.items():
        problems += runs_beyond_one(
            execution_id,
            [r for r in execution_runs if r["pid"] not in excused_pids],
            fenced,
        )

    # 4. step runs: in index order, no overlap but with excused runs
    total_runs = excused_runs = 0
    distinct = 0
    for execution_id, start in started.items():
        execution_runs = runs.get(execution_id, [])
        total_runs += len(execution_runs)
        distinct += len({r["index"] for r in execution_runs})
        counted = []
        for run in execution_runs:
            if run["pid"] in excused_pids or (run["pid"], execution_id) in fenced:
                excused_runs += 1
            else:
                counted.append(run)
        missing_runs = set(range(start.spec.steps)) - {r["index"] for r in execution_runs}
        if missing_runs:
            problems.append(f"execution {execution_id}: steps {sorted(missing_runs)} never ran")
        indexes = [r["index"] for r in counted]
        if indexes != sorted(indexes):
            problems.append(f"execution {execution_id}: runs out of order: {indexes}")
        try:
            ordering.assert_serial(counted)
        except AssertionError as exc:
            problems.append(f"execution {execution_id}: {exc}")
    for stray in sorted(set(runs) - set(started)):
        problems.append(f"step runs logged for execution {stray}, which was never started")

    # 5. the queue is empty: nothing left leased (or waiting) once everything finished
    for message in db.query("SELECT * FROM messages"):
        problems.append(f"message left in the queue: {message}")

    # 6. orphans
    for group in db.query(
        "SELECT group_id FROM groups WHERE group_id NOT IN (SELECT group_id FROM messages)"
    ):
        problems.append(f"groups row without messages: {group['group_id']}")
    for message in db.query(
        "SELECT seq, group_id FROM messages WHERE group_id NOT IN (SELECT id FROM executions)"
    ):
        problems.append(f"message {message['seq']} of missing execution {message['group_id']}")

    if problems:
        shown = "\n  ".join(problems[:30])
        more = f"\n  ... and {len(problems) - 30} more" if len(problems) > 30 else ""
        raise AssertionError(f"{len(problems)} invariant violations:\n  {shown}{more}")
    return Tally(
        executions=len(started),
        steps=len(steps),
        step_runs=total_runs,
        reruns=total_runs - distinct,
        excused_runs=excused_runs,
    )
