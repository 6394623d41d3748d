"""The latency phase: what one user running a few checkouts at a time waits.

``C`` client threads each call ``start()`` then ``result()`` on workflows of ``K`` trivial
steps, with a worker in the same process (concurrency ``C``); then a 1-step workflow's
``start() -> result()``, with the worker in the same process and in another one (which
picks the work up by its idle poll). One client's figures are measured in rounds, each
beside writes from the floor client (bench/floor.py: one socket, a prepared request) and
from one httpx client; each latency goal is a ratio to the floor, printed with whether
it is met. Last, what an idle worker adds to the rqlite leader's CPU (its
polls), over the idle cluster's own.

    python -m bench --phases raw,latency     # just this phase and its reference
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from typing import Any

import psutil  # type: ignore[import-untyped]

from bench import latency
from bench.children import ROOT
from bench.floor import SCHEMA as FLOOR_SCHEMA
from bench.floor import floor_slice
from bench.latency_goals import DBOS_RAW_WRITES_PER_S, DBOS_STEPS_PER_S, goals
from bench.phases import Context, start_workers

#: The goals of one client (C=1 steps/s and step-to-step, the 1-step workflow in-process)
#: are measured in rounds, each beside slices of the floor's and of raw single-client
#: writes of its own (:func:`paired_rounds`): this machine's speed drifts by more than
#: those goals' margins within a minute.
ROUNDS = 5
RAW_SLICE_S = 2.0
WARM_UP = 2  # untimed 1-step workflows when a round's worker starts


def phase_count(settings: Any, *, paired: bool) -> int:
    """The progress lines :func:`run_latency` prints: C=1 and the in-process 1-step
    workflow as rounds, each a raw slice, a floor slice and the workflows (or one line
    each, unpaired),
    then C=8, the cross-process 1-step workflow and the embedded row."""
    return 3 + (3 * _rounds(settings) if paired else 2)


def _rounds(settings: Any) -> int:
    return 1 if settings.smoke else ROUNDS


def run_latency(ctx: Context, engine: Any, raw: dict[str, Any] | None) -> dict[str, Any]:
    from bench import app

    smoke = ctx.settings.smoke
    executions = 8 if smoke else 200  # the E=200 workflows of K=5 steps
    samples = 10 if smoke else 60
    out: dict[str, Any] = {"clients": {}}
    if raw is not None:
        paired = paired_rounds(ctx, engine, _rounds(ctx.settings), executions, samples)
        out["clients"]["1"], out["one_in_process"] = paired.pop("c1"), paired.pop("one")
        out["paired"] = paired
    for clients in (1, 8) if raw is None else (8,):
        ctx.progress.start(f"latency, C={clients}, K=5, worker in this process")
        with engine.running_worker(concurrency=clients):
            out["clients"][str(clients)] = clients_run(
                engine, app.turnaround_chain, clients, executions
            )
        ctx.progress.done(
            f"{out['clients'][str(clients)]['steps_per_s']} steps/s, step-to-step p50 "
            f"{out['clients'][str(clients)]['step_to_step']['p50_ms']} ms"
        )
    if raw is None:
        ctx.progress.start("latency, 1-step start -> result, worker in this process")
        with engine.running_worker(concurrency=1):
            out["one_in_process"] = latency.summary_ms(
                _one_step(engine, app.turnaround_one, samples)
            )
        ctx.progress.done(f"p50 {out['one_in_process']['p50_ms']} ms")
    out["clients"] = dict(sorted(out["clients"].items()))
    ctx.progress.start("latency, 1-step start -> result, worker in another process")
    window = 0.5 if smoke else 10.0
    baseline = _leader_cpu_percent(ctx, window)  # the idle cluster, no worker at all
    children = start_workers(ctx, 1, samples=False)
    try:
        time.sleep(1.0)  # let it connect and go idle: the poll is part of what is measured
        out["one_cross_process"] = latency.summary_ms(
            _one_step(engine, app.turnaround_one, samples)
        )
        with_worker = _leader_cpu_percent(ctx, window)
        out["idle_poll"] = {
            "seconds": window,
            "cluster_alone_percent": baseline,
            "with_idle_worker_percent": with_worker,
            # What one idle worker adds (its polls and presence beats).
            "leader_core_percent": round(max(0.0, with_worker - baseline), 2),
        }
    finally:
        for child in children:
            child.stop()
    ctx.progress.done(
        f"p50 {out['one_cross_process']['p50_ms']} ms; an idle worker costs the leader "
        f"{out['idle_poll']['leader_core_percent']}% of a core"
    )
    ctx.progress.start("latency, C=32, K=5, embedded SQLite (another process)")
    # It measures SQLite and Python on this machine's 2 cores: first let the cluster finish
    # what earlier phases left it doing (snapshots after the naive phase's 20,000 entries).
    quiet = _quiet_cluster(ctx, timeout=2.0 if smoke else 30.0)
    out["embedded_32"] = {**_embedded(32, 64 if smoke else 1024), "cluster_quiet": quiet}
    ctx.progress.done(
        f"{out['embedded_32']['steps_per_s']} steps/s, step-to-step p99 "
        f"{out['embedded_32']['step_to_step']['p99_ms']} ms"
    )
    out["goals"] = goals(out, raw)
    return out


def _embedded(clients: int, executions: int) -> dict[str, Any]:
    """The C-client pattern on a local SQLite file (``bench.embedded``, its own process)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.embedded", "--clients", str(clients),
         "--executions", str(executions)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def paired_rounds(
    ctx: Context, engine: Any, rounds: int, executions: int, samples: int
) -> dict[str, Any]:
    """The C=1 pattern and the 1-step in-process workflow, each round next to a slice of
    raw single-client writes (the raw phase's method, ``RAW_SLICE_S`` seconds): the goals
    set against a raw write judge them against the writes measured beside them. Rounds
    alternate which comes first, so a drift of the machine's speed weighs on both sides.

    Returns the pooled figures (``c1``: as :func:`clients_run`; ``one``: the 1-step
    summary), the raw reference pooled over the slices (``raw``) and each round's own
    (``rounds``: raw writes/s and C=1 steps/s)."""
    from bench import app
    from bench.phases import run_raw

    raw_samples: list[float] = []
    floor_samples: list[float] = []
    raw_writes = raw_seconds = floor_writes = floor_seconds = 0.0
    runs: list[dict[str, Any]] = []
    sync_gaps: list[float] = []
    ones: list[float] = []
    table: list[dict[str, Any]] = []
    slice_s = min(RAW_SLICE_S, ctx.settings.duration)

    def raw_slice(index: int) -> dict[str, Any]:
        nonlocal raw_writes, raw_seconds
        label = f"1 client, round {index + 1} of {rounds}"
        result = run_raw(ctx, 1, 1, label, duration=slice_s, samples_into=raw_samples)
        raw_writes, raw_seconds = raw_writes + result["writes"], raw_seconds + result["seconds"]
        return result

    ctx.cluster.execute([[FLOOR_SCHEMA]])

    def floor(index: int) -> dict[str, Any]:
        nonlocal floor_writes, floor_seconds
        ctx.progress.start(f"the floor (one socket, a prepared request), round {index + 1}")
        result = floor_slice(ctx.cluster.leader_url, slice_s, floor_samples)
        floor_writes, floor_seconds = (
            floor_writes + result["writes"],
            floor_seconds + result["seconds"],
        )
        ctx.progress.done(f"p50 {result['latency']['p50_ms']} ms")
        return result

    def workflows(index: int) -> dict[str, Any]:
        ctx.progress.start(f"latency, C=1, K=5, worker in this process, round {index + 1}")
        with engine.running_worker(concurrency=1):
            _one_step(engine, app.turnaround_one, WARM_UP)  # the worker's first requests
            run = _clients(engine, app.turnaround_chain, 1, executions // rounds)
            sync = _clients(engine, app.turnaround_chain_sync, 1, executions // rounds)
            sync_gaps.extend(sync["gaps"])
            ones.extend(_one_step(engine, app.turnaround_one, samples // rounds))
        run["steps_per_s"] = run["executions"] * 5 / run["seconds"]
        runs.append(run)
        ctx.progress.done(f"{run['steps_per_s']:.1f} steps/s")
        return run

    for index in range(rounds):
        if index % 2 == 0:
            raw_r, floor_r, run = raw_slice(index), floor(index), workflows(index)
        else:
            run, floor_r, raw_r = workflows(index), floor(index), raw_slice(index)
        target = DBOS_STEPS_PER_S[1] * raw_r["writes_per_s"] / DBOS_RAW_WRITES_PER_S
        table.append(
            {
                "raw_writes_per_s": raw_r["writes_per_s"],
                "raw_p50_ms": raw_r["latency"]["p50_ms"],
                "floor_p50_ms": floor_r["latency"]["p50_ms"],
                "c1_steps_per_s": round(run["steps_per_s"], 1),
                "c1_ratio": latency.ratio(run["steps_per_s"], target),
            }
        )
    return {
        "c1": _summary(
            sum(run["executions"] for run in runs),
            sum(run["seconds"] for run in runs),
            [gap for run in runs for gap in run["gaps"]],
        ),
        "c1_sync": latency.summary_ms(sync_gaps),
        "one": latency.summary_ms(ones),
        "slice_s": slice_s,
        "floor": {
            "writes": int(floor_writes),
            "seconds": round(floor_seconds, 3),
            "writes_per_s": round(floor_writes / floor_seconds, 1) if floor_seconds else 0.0,
            "latency": latency.summary_ms(floor_samples),
        },
        "raw": {
            "writes": int(raw_writes),
            "seconds": round(raw_seconds, 3),
            "writes_per_s": round(raw_writes / raw_seconds, 1),
            "latency": latency.summary_ms(raw_samples),
        },
        "rounds": table,
    }


def clients_run(engine: Any, workflow: Any, clients: int, executions: int) -> dict[str, Any]:
    """C client threads, each ``start()`` then ``result()`` of 5-step workflows in turn."""
    run = _clients(engine, workflow, clients, executions)
    return _summary(run["executions"], run["seconds"], run["gaps"])


def _summary(executions: int, seconds: float, gaps: list[float]) -> dict[str, Any]:
    return {
        "executions": executions,
        "steps_per_s": round(executions * 5 / seconds, 1),
        "step_to_step": latency.summary_ms(gaps),
    }


def _clients(engine: Any, workflow: Any, clients: int, executions: int) -> dict[str, Any]:
    """:func:`clients_run`'s run: how many executions, in how many seconds, and the gaps
    between their steps (seconds)."""
    from bench.app import Chain

    handles: list[Any] = []
    lock = threading.Lock()

    def client(count: int) -> None:
        for _ in range(count):
            handle = engine.start(workflow, Chain(steps=5))
            handle.result(timeout=120)
            with lock:
                handles.append(handle)

    threads = [
        threading.Thread(target=client, args=(executions // clients,)) for _ in range(clients)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    gaps: list[float] = []
    for handle in handles:
        steps = [s for s in handle.steps() if s.kind == "step"]
        gaps += [b.ended_at - a.ended_at for a, b in itertools.pairwise(steps)]
    return {"executions": len(handles), "seconds": elapsed, "gaps": gaps}


def _one_step(engine: Any, workflow: Any, samples: int) -> list[float]:
    seconds = []
    for i in range(samples):
        started = time.perf_counter()
        engine.start(workflow, i).result(timeout=60)
        seconds.append(time.perf_counter() - started)
    return seconds


def _quiet_cluster(
    ctx: Context, timeout: float, below: float = 10.0, window: float = 0.5
) -> dict[str, float]:
    """Wait (up to ``timeout``) until the cluster's nodes together use less than ``below``
    percent of a core over ``window``; how long that took and the last figure."""
    processes = [psutil.Process(pid) for pid in ctx.cluster.node_pids]
    started = time.monotonic()
    while True:
        before = sum(sum(p.cpu_times()[:2]) for p in processes)
        time.sleep(window)
        used = sum(sum(p.cpu_times()[:2]) for p in processes) - before
        percent = round(used / window * 100, 1)
        waited = time.monotonic() - started
        if percent < below or waited >= timeout:
            return {"waited_s": round(waited, 1), "cluster_cpu_percent": percent}


def _leader_cpu_percent(ctx: Context, seconds: float) -> float:
    """The Raft leader's CPU over ``seconds``, as a percent of one core."""
    leader_id = ctx.cluster.raft_mark().leader
    node = next(n for n in ctx.cluster.nodes if n.node_id == leader_id)
    process = psutil.Process(node.pid)
    before = process.cpu_times()
    time.sleep(seconds)
    after = process.cpu_times()
    used = (after.user + after.system) - (before.user + before.system)
    return round(used / seconds * 100, 2)
