"""The other two goals of "Long executions", run by ``--mode long`` after its table.

- **A sleeping loop**: one execution that sleeps ``sleep_loop_seconds`` then runs a step,
  ``sleep_loop`` times, on embedded SQLite with one in-process worker: the wake-to-step
  latency (the step's start minus the sleep's recorded wake time) over the last 50 wakes
  against the first 50. The issue's loop sleeps 1 s, which pauses in place (no claim);
  the default 1.5 s parks, so each wake is a claim of a parked event, and with sticky
  continuation it resumes the kept run instead of replaying a history that grows by two
  calls a wake.
- **Memory with many executions in flight**: ``inflight`` executions that run a step then
  sleep (all parked at once), one in-process worker: the process's resident memory when
  all are parked, and how many suspended runs the worker keeps (at most ``sticky_cache``).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from raftflow.engine.runtime.runcache import resident_mb

from bench.phases import Context
from raftflow import Engine

#: Wakes compared at each end of the sleeping loop.
WAKES_WINDOW = 50


def sleep_loop(ctx: Context, path: Path, wakes: int, seconds: float) -> dict[str, Any]:
    engine = Engine.from_url(f"sqlite:///{path}")
    try:

        @engine.step(name="after_wake")
        def after_wake(i: int) -> int:
            return i

        @engine.workflow(name="sleeping_loop")
        def loop(n: int) -> int:
            total = 0
            for i in range(n):
                engine.sleep(seconds)
                total += after_wake(i)
            return total

        with engine.running_worker(concurrency=1) as worker:
            handle = engine.start(loop, wakes)
            deadline = time.monotonic() + ctx.settings.phase_timeout
            while not handle.status().is_final:
                ctx.progress.update(f"sleeping loop: {len(handle.steps()) // 2}/{wakes} wakes")
                if time.monotonic() > deadline:
                    raise RuntimeError("sleeping loop: not done after the phase timeout")
                time.sleep(1.0)
            assert handle.result(timeout=5) == wakes * (wakes - 1) // 2
            stats = worker.stats
        records = handle.steps()
    finally:
        engine.close()
    sleeps = [r for r in records if r.kind == "sleep"]
    steps = [r for r in records if r.kind == "step"]
    late = [
        (step.started_at - sleep.wake_at) * 1e3
        for sleep, step in zip(sleeps, steps, strict=True)
        if sleep.wake_at is not None
    ]
    w = min(WAKES_WINDOW, len(late) // 2)
    first, last = statistics.fmean(late[:w]), statistics.fmean(late[-w:])
    return {
        "wakes": wakes,
        "sleep_s": seconds,
        "window": w,
        "first_wakes_ms": round(first, 2),
        "last_wakes_ms": round(last, 2),
        "last_over_first": round(last / first, 2) if first > 0 else None,
        "claims": stats.claimed,
        "resumed": stats.resumed,
    }


def many_in_flight(ctx: Context, path: Path, count: int, sticky_cache: int) -> dict[str, Any]:
    engine = Engine.from_url(f"sqlite:///{path}")
    try:

        @engine.step(name="before_nap")
        def before_nap(i: int) -> int:
            return i

        @engine.workflow(name="napper")
        def napper(i: int) -> int:
            value = before_nap(i)
            engine.sleep(3600.0)
            return value

        before = resident_mb()
        with engine.running_worker(concurrency=64, sticky_cache=sticky_cache) as worker:
            for i in range(count):
                engine.start(napper, i)
                if i % 500 == 0:
                    ctx.progress.update(f"in flight: {i:,}/{count:,} started")
            deadline = time.monotonic() + ctx.settings.phase_timeout
            while True:
                parked = engine.store.database.run(_count_sleeps(engine))
                ctx.progress.update(f"in flight: {parked:,}/{count:,} asleep")
                if parked >= count:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"in flight: {parked}/{count} asleep at the timeout")
                time.sleep(1.0)
            time.sleep(1.0)  # the last turns end and their runs are kept (or evicted)
            rss = resident_mb()
            kept = sum(len(run.runs) for run in worker_runs(worker))
    finally:
        engine.close()
    return {
        "executions": count,
        "sticky_cache": sticky_cache,
        "rss_mb_before": round(before, 1),
        "rss_mb_all_parked": round(rss, 1),
        "kept_runs": kept,
    }


def _count_sleeps(engine: Engine) -> Any:
    from raftflow.transports.db.flow import Request, Statement

    response = yield Request(
        (Statement("bench.sleeps", "SELECT COUNT(*) AS n FROM steps WHERE kind = 'sleep'"),),
        level="weak",
    )
    row = response.raise_for_errors()[0].first()
    return int(row["n"]) if row else 0


def worker_runs(worker: Any) -> list[Any]:
    run = getattr(worker, "_run", None)
    return [run] if run is not None else []


def run_goals(ctx: Context, work_dir: Path) -> dict[str, Any]:
    s = ctx.settings
    ctx.progress.start(f"sleeping loop: {s.sleep_loop} x sleep {s.sleep_loop_seconds}s, SQLite")
    loop = sleep_loop(ctx, work_dir / "sleep-loop.db", s.sleep_loop, s.sleep_loop_seconds)
    ctx.progress.done(
        f"wake -> step {loop['first_wakes_ms']} ms (first {loop['window']}) vs "
        f"{loop['last_wakes_ms']} ms (last {loop['window']})"
    )
    ctx.progress.start(f"{s.inflight:,} executions in flight, SQLite")
    memory = many_in_flight(ctx, work_dir / "in-flight.db", s.inflight, 256)
    ctx.progress.done(f"RSS {memory['rss_mb_all_parked']} MB, {memory['kept_runs']} runs kept")
    return {"sleep_loop": loop, "in_flight": memory}


def render_goals(goals: dict[str, Any]) -> list[str]:
    loop, memory = goals["sleep_loop"], goals["in_flight"]
    return [
        "",
        f"sleeping loop ({loop['wakes']} x sleep {loop['sleep_s']} s then a step, SQLite): "
        f"wake -> step {loop['first_wakes_ms']} ms over the first {loop['window']} wakes, "
        f"{loop['last_wakes_ms']} ms over the last {loop['window']} "
        f"({loop['last_over_first']}x); {loop['resumed']}/{loop['claims']} claims resumed",
        f"{memory['executions']:,} executions in flight (all asleep, sticky_cache="
        f"{memory['sticky_cache']}): RSS {memory['rss_mb_before']} MB before, "
        f"{memory['rss_mb_all_parked']} MB with all parked; {memory['kept_runs']} runs kept",
    ]
