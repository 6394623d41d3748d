"""What must hold after every simulated run (on top of the checks made while it runs: no
group ever has two live leases; a lease the heartbeat drops is really lost; the client never
sees a started execution "not found")."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from tests.sim import split, workload
from tests.sim.invariants_more import check_more, forked_from
from tests.sim.workload_more import FORK
from tests.sim.workload_sync import SHAPES

if TYPE_CHECKING:
    from tests.sim.sim import Simulation
    from tests.sim.workload import Run

FINAL = ("succeeded", "failed", "cancelled")
#: Calls whose record carries the number of the run that produced it.
RUN_STEPS = (
    *("work", "flaky", "stamp", "open_account", "deposit", "rated"),
    *("swork", "sflaky", "sstamp", "sopen_account", "sdeposit"),
    *("cut", "scut", "brittle", "fired"),
)


def check(sim: Simulation) -> list[str]:
    problems: list[str] = []
    cluster = sim.everywhere  # every cluster's rows (a sharded seed: tests/sim/shards.py)
    executions = {row["id"]: row for row in cluster.query("SELECT * FROM executions")}
    steps: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for row in cluster.query("SELECT * FROM steps ORDER BY execution_id, idx"):
        steps[row["execution_id"]][row["idx"]] = row
    planned = {item.id: item for item in sim.plan.executions}

    # 1. Nothing lost, nothing stuck, nothing extra; outcomes are the workflows' own.
    for item in sim.plan.executions:
        row = executions.get(item.id)
        if row is None:
            problems.append(f"{item.id}: lost (started, not in the database)")
            continue
        status = row["status"]
        if status not in FINAL:
            problems.append(f"{item.id}: stuck ({status}) after {sim.end_time:.0f}s")
            continue
        error = json.loads(row["error"]) if row["error"] else None
        kind = error.get("type") if error else None
        if item.workflow in ("doomed", "forked"):  # forked: the source stays failed
            if status != "failed" or kind != "ValueError":
                problems.append(
                    f"{item.id}: {item.workflow} ended {status} ({kind}), not failed by its step"
                )
        elif item.workflow in ("timed", "stimed") and status == "cancelled":
            if error is None or error.get("message") != "timeout":
                problems.append(f"{item.id}: cancelled, not by its timeout ({error})")
        elif status == "cancelled":
            if item.cancel_at is None:
                problems.append(f"{item.id}: cancelled, but nobody cancelled it")
        elif status != "succeeded":
            problems.append(f"{item.id}: {status} ({kind}: {error and error.get('message')})")
    for execution_id, row in executions.items():
        root = execution_id.split("/")[0].split("#")[0].removesuffix(FORK)
        if sim.plan.cron and row["workflow"] == "tick":
            continue  # the schedule's (tests/sim/invariants_more.py)
        if not _started(sim, planned, root, execution_id):
            problems.append(f"{execution_id}: exists but was never started")
        elif "/" in execution_id and row["status"] not in FINAL:
            problems.append(f"{execution_id}: child stuck ({row['status']})")

    # 2. Records: indexes 0..n-1 with no gap.
    for execution_id, records in steps.items():
        if sorted(records) != list(range(len(records))):
            problems.append(f"{execution_id}: step records {sorted(records)} have a gap")

    # 3. Runs against records: each record from a run that happened; a completed step never
    #    runs again; no two runs of an execution overlap unless one of them was not recorded
    #    (fenced); any run of a later step starts after the recorded run of an earlier ended.
    #    Executions are taken run by run (continue_as_new): "<id>#<run>", as archived.
    runs: dict[str, list[Run]] = defaultdict(list)
    for run in sim.runs.runs:
        if run.end is None:
            died = sim.cluster.process(run.process).died_at
            if died is None:
                problems.append(f"run {run.id} of {run.execution}#{run.index} never ended")
                continue
            run.end = died
        runs[f"{run.execution}#{run.generation}"].append(run)
    by_id = {run.id: run for run in sim.runs.runs}
    for execution_id, records in steps.items():
        if "#" in execution_id:
            history = execution_id
        else:
            history = f"{execution_id}#{executions[execution_id]['run']}"
        copied_from, copied = forked_from(sim, execution_id)
        recorded: dict[int, Run] = {}
        for idx, record in records.items():
            if record["name"] not in RUN_STEPS or record["status"] != "succeeded":
                continue
            output = json.loads(record["output"])
            run_id = int(output[0] if isinstance(output, list) else output)
            run = by_id.get(run_id)
            there = copied_from if idx < copied else history.split("#")[0]
            if run is None or run.execution != there or run.index != idx:
                problems.append(f"{execution_id}#{idx}: recorded run {run_id} did not run there")
                continue
            if idx >= copied:
                recorded[idx] = run
        chosen = {run.id for run in recorded.values()}
        mine = sorted(runs.get(history, []), key=lambda r: (r.start, r.id))
        for run in mine:
            done = recorded.get(run.index)
            if done is not None and run.id != done.id and run.start >= done.end and run.held:
                problems.append(
                    f"{execution_id}#{run.index}: completed by run {done.id} "
                    f"(ended {done.end:.3f}), ran again as run {run.id} at {run.start:.3f}"
                )
            for idx, earlier in recorded.items():
                if idx < run.index and run.start < earlier.end:
                    problems.append(
                        f"{execution_id}: run {run.id} of step {run.index} started at "
                        f"{run.start:.3f}, before step {idx} (run {earlier.id}) ended"
                    )
        for i, a in enumerate(mine):
            for b in mine[i + 1 :]:
                if b.start >= a.end:
                    continue
                if a.id in chosen and b.id in chosen:
                    problems.append(
                        f"{execution_id}: recorded runs {a.id} (#{a.index}, {a.process}) and "
                        f"{b.id} (#{b.index}, {b.process}) overlap"
                    )

    # 3b. Within one lease (one claim of the execution) each attempt of a step runs once.
    under: dict[tuple[str, int, int, str], Run] = {}
    for run in sim.runs.runs:
        if run.lease is None:
            continue
        key = (f"{run.execution}#{run.generation}", run.index, run.attempt, run.lease)
        first = under.setdefault(key, run)
        if first is not run:
            problems.append(
                f"{run.execution}#{run.index}: attempt {run.attempt} ran twice under one "
                f"lease (runs {first.id} and {run.id}, {run.process})"
            )

    # 4. Signals: each received once, in the order sent. Timers: never early.
    for item in sim.plan.executions:
        row = executions.get(item.id)
        if row is None or row["status"] != "succeeded":
            continue
        output = json.loads(row["output"])
        shape = SHAPES.get(item.workflow, item.workflow)
        if shape == "listener" and sim.refused.get(item.id):
            problems.append(f"{item.id}: succeeded, yet sends were refused as finished")
        if shape == "listener" and output != sim.sent.get(item.id, []):
            problems.append(f"{item.id}: received {output}, sent {sim.sent.get(item.id)}")
        if shape == "napper":
            problems += _check_sleep(sim, item.id, item.input["seconds"], output, steps)

    # 4b. Retries: an attempt starts no earlier than the delay after the previous attempt
    #     ended (its failure is recorded after that, and its wake time set from then on),
    #     less how far the reference moved between setting and honouring that wake time.
    problems += _check_retry_delays(sim)

    # 5. Transaction steps: each recorded deposit's writes applied exactly once, and only
    #    recorded ones' (a ledger row per record, none without one); balances add up.
    problems += _check_ledger(cluster)

    # 6. Rate limits: never more reserved starts of a key in any period than its limit.
    problems += _check_rates(cluster)

    # 8. The features: timeouts, continue_as_new, debounce, resume, fork, cron, fast path.
    problems += check_more(sim, executions, steps)

    # 7. The queue is empty once everything finished (but for the schedule: its message,
    #    and a time it fired as the workers stopped); no orphans.
    if not problems:
        sql = (
            "SELECT group_id, locked_by FROM messages WHERE group_id NOT LIKE 'raftflow:%' "
            "AND group_id NOT IN (SELECT id FROM sim_transitions WHERE at >= ?)"
        )
        left = cluster.query(sql, (sim.end_time,))
        if sim.split:  # events of executions finished meanwhile may wait: tests/sim/split.py
            left = split.left_unsettled(sim, sql)
        if left:
            problems.append(f"messages left in the queue: {left[:3]}")
        orphans = cluster.query(
            "SELECT group_id FROM groups WHERE group_id NOT IN (SELECT group_id FROM messages)"
        )
        if orphans:
            problems.append(f"groups without messages: {orphans[:3]}")
        stray = cluster.query(
            "SELECT DISTINCT execution_id FROM steps "
            "WHERE execution_id NOT IN (SELECT id FROM executions)"
        )
        if stray:
            problems.append(f"steps of missing executions: {stray[:3]}")
    problems += _check_served(sim, executions)
    return problems


def _started(sim: Simulation, planned: dict[str, Any], root: str, execution_id: str) -> bool:
    """Whether the plan started ``execution_id`` (its root, or itself: a sharded seed's
    limited ids begin with their key), or it is a sharded seed's child on another cluster
    (tests/sim/shards.py)."""
    if root in planned or execution_id in planned:
        return True
    return sim.sharding is not None and execution_id in sim.sharding.children.values()


def _check_served(sim: Simulation, executions: dict[str, dict[str, Any]]) -> list[str]:
    """A worker runs only executions of the queues it serves (tests/sim/sim.py,
    ``serve_queues``): a run of a step in a process that does not serve its workflow's
    queue means the claim (or the start fast path) leased it there."""
    problems = []
    queues = {name: w.queue for name, w in workload.engine.registry.workflows.items()}
    for run in sim.runs.runs:
        index = int(run.process.removeprefix("w")) if run.process.startswith("w") else None
        served = None if index is None else sim.plan.options[index].queues
        row = executions.get(run.execution.split("#")[0])
        queue = None if row is None else queues.get(row["workflow"])
        if served is not None and queue is not None and queue not in served:
            problems.append(
                f"{run.process} (serving {list(served)}) ran {run.execution}, "
                f"a {row and row['workflow']} of queue {queue!r}"
            )
    return problems


def _check_ledger(cluster: Any) -> list[str]:
    problems = []
    recorded = {
        (row["execution_id"], row["idx"]): row
        for row in cluster.query(
            "SELECT execution_id, idx, output FROM steps "
            "WHERE name IN ('deposit', 'sdeposit') AND status = 'succeeded'"
        )
    }
    rows: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for row in cluster.query("SELECT * FROM sim_ledger ORDER BY seq"):
        rows[(row["execution_id"], row["idx"])].append(row)
    for (execution_id, idx), found in rows.items():
        if len(found) > 1:
            runs = [r["run"] for r in found]
            problems.append(
                f"{execution_id}#{idx}: deposit applied {len(found)} times (runs {runs})"
            )
        record = recorded.get((execution_id, idx))
        if record is None:
            problems.append(f"{execution_id}#{idx}: deposit applied, its step not recorded")
        elif json.loads(record["output"]) != found[0]["run"]:
            problems.append(
                f"{execution_id}#{idx}: recorded run {record['output']}, "
                f"the writes of run {found[0]['run']}"
            )
    for key in recorded:
        if key not in rows:
            problems.append(f"{key[0]}#{key[1]}: deposit recorded, its writes missing")
    for row in cluster.query(
        "SELECT a.id, a.balance, (SELECT COALESCE(SUM(amount), 0) FROM sim_ledger AS l "
        "WHERE l.execution_id = a.id) AS total FROM sim_accounts AS a"
    ):
        if row["balance"] != row["total"]:
            problems.append(
                f"{row['id']}: balance {row['balance']}, its ledger rows add up to {row['total']}"
            )
    return problems


def _check_rates(cluster: Any) -> list[str]:
    from tests.sim.workload import RATE

    problems = []
    slots: dict[str, list[float]] = defaultdict(list)
    for row in cluster.query("SELECT key, at FROM rate_slots ORDER BY key, at"):
        slots[row["key"]].append(row["at"])
    for key, times in slots.items():
        times.sort()  # sharded: gathered cluster after cluster
        for first, later in zip(times, times[RATE.limit :]):
            if later - first < RATE.per - 1e-6:
                problems.append(
                    f"rate limit {key}: {RATE.limit + 1} starts reserved within "
                    f"{later - first:.3f}s (at most {RATE.limit} per {RATE.per:g}s)"
                )
                break
    return problems


def _check_sleep(
    sim: Simulation,
    execution_id: str,
    seconds: float,
    output: Any,
    steps: dict[str, dict[int, dict[str, Any]]],
) -> list[str]:
    """A durable sleep lasts at least as long as asked on the true clock, less how far the
    reference moved between its setting and its honouring (tests/sim/timers.py): the time
    stamps of the steps before and after it are at least that far apart."""
    (_, before), (after_run, after) = output
    sleep = steps[execution_id].get(1)
    wake_at = sleep["wake_at"] if sleep is not None and sleep["kind"] == "sleep" else None
    honoured = sim.runs.runs[int(after_run)].honoured
    slack = sim.timers.slack(execution_id, honoured, wake_at)
    if after - before < seconds - slack - 1e-6:
        return [f"{execution_id}: slept {after - before:.4f}s of {seconds}s (slack {slack:.4f}s)"]
    return []


def _check_retry_delays(sim: Simulation) -> list[str]:
    from tests.sim.workload import RETRY_DELAYS

    problems = []
    ends: dict[tuple[str, int, int], float] = {}
    for run in sim.runs.runs:
        if run.end is not None and run.step in RETRY_DELAYS:
            key = (run.execution, run.index, run.attempt)
            ends[key] = min(ends.get(key, run.end), run.end)
    for run in sim.runs.runs:
        if run.step not in RETRY_DELAYS or run.attempt < 2:
            continue
        ended = ends.get((run.execution, run.index, run.attempt - 1))
        delay = RETRY_DELAYS[run.step]
        slack = sim.timers.slack(run.execution, run.honoured, None)
        if ended is not None and run.start < ended + delay - slack - 1e-6:
            problems.append(
                f"{run.execution}#{run.index}: attempt {run.attempt} started "
                f"{run.start - ended:.4f}s after attempt {run.attempt - 1} ended "
                f"(retry delay {delay}s, slack {slack:.4f}s)"
            )
    return problems
