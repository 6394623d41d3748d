"""The timers phase: what the durable primitives cost in Raft entries, what a waiting
execution costs while it waits, and how late a sleeper wakes.

1. **Raft entries per primitive**, counted: one worker process runs executions one at a
   time, and every request of it and of the benchmark process (the client's start, send and
   cancel; the workers' claims and commits) is counted by kind (:mod:`bench.counting`),
   the workers' presence beats (``ops.*``, one per worker every 10 s whatever it runs)
   left out.
   Each primitive's workflow is set against the baseline, a 1-step workflow: the
   difference is what the primitive adds.
2. **A waiting execution costs 0 entries**: ``workers`` worker processes idle for a window (the
   leader's applied index before and after, and the workers' own requests counted by
   kind), then the same window with ``waiting`` executions parked (half asleep for an
   hour, half on a ``recv``): what the window holds beyond the workers' presence beats is
   what the waiting executions cost. Then every listener is sent its message and every
   sleeper is cancelled.
3. **Wake-up lateness**: ``sleepers_light`` then ``sleepers`` executions started at once,
   each sleeping a random 1-5 s: the start of the step after the sleep
   minus the recorded wake time (p50 / p99 / max), and how many woke early (must be 0).
"""

from __future__ import annotations

import time
from typing import Any

from bench.children import kill_all, stop_all
from bench.phases import Context, start_workers
from bench.timers_entries import run_primitive_costs
from bench.timers_waiting import run_waiting
from raftflow import Engine


def run_timers(ctx: Context, engine: Engine) -> dict[str, Any]:
    """Part 1 on one worker process (a second idle worker would race it for every event:
    its empty claims are Raft entries too, but not the primitive's); parts 2 and 3 on
    ``workers`` x ``concurrency`` (the same process again when ``workers`` is 1)."""
    s = ctx.settings
    children = start_workers(ctx, 1, samples=False)
    marks = [0]
    try:
        time.sleep(1.0)  # connected and idle
        primitives = run_primitive_costs(ctx, engine, children, marks)
        if s.workers > 1:
            first = stop_all(children)
            children = start_workers(ctx, s.workers, samples=False)
            marks = [0]
            time.sleep(1.0)
        waiting = run_waiting(ctx, engine, children, marks)
        results = stop_all(children)
    finally:
        kill_all(children)
    return {
        "primitives": primitives(first if s.workers > 1 else results),
        "waiting": waiting(results),
    }


def render(data: dict[str, Any]) -> str:
    from bench.report import _table

    lines = ["", "Raft entries per primitive (counted, one execution at a time, beats excluded)"]
    headers = ["case", "entries/execution", "extra", "against", "by kind"]
    rows = []
    for case, r in data["primitives"]["cases"].items():
        rows.append(
            [
                case,
                f"{r['entries_per_execution']:.2f}",
                "-" if r["extra"] is None else f"+{r['extra']:.2f}",
                r["against"] or "-",
                ", ".join(f"{k} {v:g}" for k, v in r["by_kind"].items()),
            ]
        )
    lines.append(_table(headers, rows))
    w = data["waiting"]
    lines += [
        "",
        f"waiting: {w['idle_entries']} Raft entries in {w['window_s']:.0f}s with the "
        f"{w['workers']} workers idle ({_kinds(w['idle_by_kind'])}), {w['waiting_entries']} "
        f"with {w['waiting']:,} executions waiting, asleep or on a recv "
        f"({_kinds(w['waiting_by_kind'])}): {w['entries_per_waiting_execution']} per waiting "
        "execution, beats aside",
    ]
    for wake in w["wakes"]:
        lat = wake["lateness"]
        lines.append(
            f"wake-up: {wake['woke']:,}/{wake['sleepers']:,} sleepers of 1-5 s woke "
            f"(started in {wake['start_seconds']}s), {wake['early']} early; lateness (next "
            f"step's start - wake time) p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms, "
            f"max {lat['max_ms']} ms"
        )
    return "\n".join(lines)


def _kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none counted"
