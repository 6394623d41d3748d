"""What must hold of the engine's other features after a simulated run (the kinds of
tests/sim/workload_more.py, the start fast path of tests/sim/client.py)."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tests.sim.cluster import EPOCH
from tests.sim.workload_more import DEBOUNCE, FORK, STEP_TIMEOUT, WORKFLOW_TIMEOUT

if TYPE_CHECKING:
    from tests.sim.plan import Planned
    from tests.sim.sim import Simulation
    from tests.sim.workload import Run

Rows = dict[str, dict[str, Any]]
Steps = dict[str, dict[int, dict[str, Any]]]
#: Simulated seconds two floats of the simulated clock may differ by and still be equal.
EPS = 1e-6
#: How far a worker's reading of the cluster's clock may be from the simulation's time,
#: beyond the leaders' clock jumps (its estimate's uncertainty).
CLOCK_SLACK = 0.5


def forked_from(sim: Simulation, execution_id: str) -> tuple[str, int]:
    """The execution ``execution_id`` was forked from and how many of its records it
    copied; ("", 0) for one that was not forked."""
    if execution_id.endswith(FORK):
        source = execution_id.removesuffix(FORK)
        item = next((i for i in sim.plan.executions if i.id == source), None)
        if item is not None and item.workflow == "forked":
            return source, int(item.input["steps"])
    return "", 0


def check_more(sim: Simulation, executions: Rows, steps: Steps) -> list[str]:
    problems: list[str] = []
    runs: dict[str, list[Run]] = defaultdict(list)
    for run in sim.runs.runs:
        runs[run.execution].append(run)
    transitions: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for row in sim.everywhere.query("SELECT id, status, at FROM sim_transitions ORDER BY seq"):
        transitions[row["id"]].append((row["status"], row["at"]))
    for item in sim.plan.executions:
        row = executions.get(item.id)
        if row is None:
            continue  # reported as lost
        mine = runs.get(item.id, [])
        if item.workflow in ("timed", "stimed"):
            problems += _timeout(sim, item, row, transitions[item.id])
        elif item.workflow in ("stepcut", "sstepcut"):
            problems += _step_timeouts(item, steps.get(item.id, {}), mine, sim.cluster.clock_moved)
        elif item.workflow in ("looper", "slooper"):
            problems += _chain_of_runs(item, row, executions, steps)
        elif item.workflow == "debounced":
            problems += _debounce(sim, item, row, mine, transitions[item.id])
        elif item.workflow == "fragile":
            problems += _resumed(item, row, steps.get(item.id, {}), mine)
        elif item.workflow == "forked":
            problems += _forked(sim, item, executions, steps, runs)
    problems += _fires(sim, executions)
    problems += _fast_starts(sim, runs)
    return problems


def _timeout(
    sim: Simulation, item: Planned, row: dict[str, Any], changes: list[tuple[str, float]]
) -> list[str]:
    """A timeout cancels no earlier than its deadline: the cancel is applied at least the
    timeout after the start was called, less how far the reference moved between the
    starter's clock and the canceller's."""
    if row["status"] != "cancelled" or not item.started:
        return []
    cancelled = next((at for status, at in changes if status == "cancelled"), None)
    if cancelled is None:
        return [f"{item.id}: cancelled, the change never seen"]
    called, _, _, reference, _ = item.started[0]
    slack = sim.timers.deadline_slack(item.id, reference)
    if cancelled < called + WORKFLOW_TIMEOUT - slack - EPS:
        return [
            f"{item.id}: cancelled by its {WORKFLOW_TIMEOUT}s timeout "
            f"{cancelled - called:.4f}s after its start (slack {slack:.4f}s)"
        ]
    return []


def _step_timeouts(
    item: Planned, records: dict[int, dict[str, Any]], runs: list[Run], clock_moved: float
) -> list[str]:
    """An attempt is cut no earlier than its timeout; one that ended within it is not cut.
    (The run whose outcome was recorded: the last one held under a lease by the worker that
    recorded it -- none if its process was stopped before its code began and the timeout
    cut it there, even when that worker ran the step under an earlier lease: the recorded
    attempt began, by the cluster's clock, after that run had ended.)"""
    problems = []
    for idx, record in records.items():
        held = [
            r
            for r in runs
            if r.index == idx and r.held and r.end is not None and r.process == record["worker_id"]
        ]
        if not held:
            continue
        last = max(held, key=lambda r: (r.start, r.id))
        began = float(record["started_at"]) - EPOCH  # the cluster's clock, as the worker read it
        if began > (last.end or 0.0) + clock_moved + CLOCK_SLACK:
            continue  # a later attempt, cut before its code began
        took = (last.end or 0.0) - last.entered
        error = json.loads(record["error"]) if record["error"] else {}
        if error.get("type") == "StepTimeoutError" and took < STEP_TIMEOUT - EPS:
            problems.append(
                f"{item.id}#{idx}: cut by its {STEP_TIMEOUT}s timeout after {took:.4f}s "
                f"(run {last.id})"
            )
        if record["status"] == "succeeded" and took > STEP_TIMEOUT + EPS:
            problems.append(
                f"{item.id}#{idx}: ran {took:.4f}s (run {last.id}), over its "
                f"{STEP_TIMEOUT}s timeout, and succeeded"
            )
    return problems


def _chain_of_runs(item: Planned, row: dict[str, Any], executions: Rows, steps: Steps) -> list[str]:
    """continue_as_new: runs 1..n archived as "<id>#<run>" (status continued), each with
    its own step record and the next run's input as its output; the last one's outcome
    is the execution's."""
    if row["status"] != "succeeded":
        return []
    left = int(item.input["left"])
    problems = []
    if json.loads(row["output"]) != left + 1 or row["run"] != left + 1:
        problems.append(f"{item.id}: ended run {row['run']} with {row['output']}, not {left + 1}")
    for n in range(1, left + 2):
        archived = executions.get(f"{item.id}#{n}") if n <= left else row
        if archived is None:
            problems.append(f"{item.id}: run {n} not archived")
            continue
        given = json.loads(archived["input"])
        if given.get("run", 1) != n or given.get("left") != left - n + 1:
            problems.append(f"{item.id}: run {n} ran with {given}")
        history = steps.get(f"{item.id}#{n}" if n <= left else item.id, {})
        if [r["status"] for r in history.values()] != ["succeeded"]:
            problems.append(f"{item.id}: run {n} recorded {sorted(history)}")
        if n <= left:
            if archived["status"] != "continued":
                problems.append(f"{item.id}#{n}: {archived['status']}, not continued")
            following = executions.get(f"{item.id}#{n + 1}", row)
            if json.loads(archived["output"]) != json.loads(following["input"]):
                problems.append(f"{item.id}#{n}: its output is not run {n + 1}'s input")
    return problems


def _debounce(
    sim: Simulation,
    item: Planned,
    row: dict[str, Any],
    runs: list[Run],
    changes: list[tuple[str, float]],
) -> list[str]:
    """Debounce: the execution runs once, with the last input started before it was first
    claimed (a start acknowledged before folded in; one after changed nothing), no
    earlier than the debounce after that input's start."""
    claimed = next((at for status, at in changes if status == "running"), None)
    if row["status"] != "succeeded" or not runs or not item.started or claimed is None:
        return []
    value = json.loads(row["output"])[0]
    values = [given["value"] for _, _, given, _, _ in item.started]
    acked_before = [k for k, (_, acked, _, _, _) in enumerate(item.started) if acked <= claimed]
    chosen = next((k for k, v in enumerate(values) if v == value), None)
    if chosen is None or (acked_before and chosen < max(acked_before)):
        return [
            f"{item.id}: ran with {value}; inputs started {values}, those acknowledged "
            f"before its claim at {claimed:.4f}: {[values[k] for k in acked_before]}"
        ]
    called, _, _, reference, _ = item.started[chosen]
    first = min(runs, key=lambda r: (r.start, r.id))
    slack = sim.timers.moved(reference, first.reference)
    if called >= claimed or claimed < called + DEBOUNCE - slack - EPS:
        return [
            f"{item.id}: claimed {claimed - called:.4f}s after the start of its input "
            f"{value} (debounce {DEBOUNCE}s, slack {slack:.4f}s)"
        ]
    return []


def _resumed(
    item: Planned, row: dict[str, Any], records: dict[int, dict[str, Any]], runs: list[Run]
) -> list[str]:
    """Resume: the failed step runs again after the resume; the earlier ones are replayed
    from their records (none runs again)."""
    if item.recovered_at is None:
        return [f"{item.id}: never failed (nothing to resume)"]
    failed = int(item.input["steps"])
    problems = []
    if row["status"] != "succeeded":
        problems.append(f"{item.id}: resumed, then {row['status']}")
    for run in runs:
        if run.held and run.index < failed and run.start > item.recovered_at:
            problems.append(f"{item.id}#{run.index}: ran again after the resume (run {run.id})")
    record = records.get(failed)
    if record is not None and record["status"] == "succeeded":
        by_id = {r.id: r for r in runs}
        run = by_id.get(int(json.loads(record["output"])))
        if run is None or run.start < item.recovered_at:
            problems.append(f"{item.id}#{failed}: its record is not of a run after the resume")
    return problems


def _forked(
    sim: Simulation, item: Planned, executions: Rows, steps: Steps, runs: dict[str, list[Run]]
) -> list[str]:
    """Fork: a new execution with the source's records before the failed step (copied:
    their functions not called again) that runs the failed step and succeeds."""
    if item.recovered_at is None:
        return [f"{item.id}: never failed (nothing to fork)"]
    fork_id = item.id + FORK
    fork = executions.get(fork_id)
    if fork is None or fork["status"] != "succeeded":
        return [f"{fork_id}: {None if fork is None else fork['status']} after the fork"]
    failed = int(item.input["steps"])
    problems = []
    source, copied = steps.get(item.id, {}), steps.get(fork_id, {})
    for idx in range(failed):
        if (copied.get(idx) or {}).get("output") != (source.get(idx) or {}).get("output"):
            problems.append(f"{fork_id}#{idx}: not the source's record")
    for run in runs.get(fork_id, []):
        if run.index < failed:
            problems.append(f"{fork_id}#{run.index}: copied, yet ran (run {run.id})")
    return problems


def _fires(sim: Simulation, executions: Rows) -> list[str]:
    """Cron: each time fired once as its workflow saw it, by its own execution; every
    execution of the schedule ran; no time skipped between the first and the last."""
    if not sim.plan.cron:
        return []
    problems = []
    seen: dict[str, set[str]] = defaultdict(set)
    for at, execution_id in sim.fires:
        seen[at].add(execution_id)
    for at, ids in sorted(seen.items()):
        if ids != {f"tick@{at}"}:
            problems.append(f"schedule time {at} run by {sorted(ids)}")
    started = {e for e, row in executions.items() if row["workflow"] == "tick"}
    for execution_id in sorted(started - {f"tick@{at}" for at in seen}):
        if executions[execution_id]["status"] == "succeeded":
            problems.append(f"{execution_id}: succeeded, yet never ran")
    times = sorted(datetime.fromisoformat(at).timestamp() for at in seen)
    for before, after in itertools.pairwise(times):
        if after - before != 3.0:
            problems.append(f"schedule: times {before} then {after} (a time skipped or doubled)")
    return problems


#: The kinds whose first call is a step, run as soon as the execution runs (not a wait).
FIRST_IS_STEP = frozenset(
    {
        *("chain", "schain", "tochain", "retried", "sretried", "doomed", "parent", "sparent"),
        *("napper", "snapper", "banker", "sbanker", "timed", "stimed", "stepcut", "sstepcut"),
        *("looper", "slooper", "fragile", "forked"),
    }
)


def _fast_starts(sim: Simulation, runs: dict[str, list[Run]]) -> list[str]:
    """The start fast path: an execution handed at its start to a worker of the starting
    process runs there first -- unless that process died or was stopped before (its
    leased start then lapses and another worker takes it over)."""
    problems = []
    kinds = {item.id: item.workflow for item in sim.plan.executions}
    for execution_id, who in sim.adopted.items():
        mine = runs.get(execution_id)
        if not mine or kinds.get(execution_id) not in FIRST_IS_STEP:
            continue
        first = min(mine, key=lambda r: (r.start, r.id))
        process = sim.cluster.process(who)
        stopped = any(
            when <= first.start and f"w{index}" == who for when, index, _ in sim.plan.pauses
        ) or (process.died_at is not None and process.died_at <= first.start)
        if (first.process != who or not first.held) and not stopped:
            problems.append(
                f"{execution_id}: started leased to {who}, first run by {first.process} "
                f"(run {first.id}{'' if first.held else ', its lease lost'})"
            )
    return problems
