"""The timers phase, parts 2 and 3 (:mod:`bench.timers`): what executions cost while they
wait (a window of idle workers against one with executions parked), then how late
sleepers wake."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from bench import app, latency
from bench.children import Child
from bench.phases import Context
from bench.timers_common import BEAT_KINDS, Figures, mark, wait_weak, worker_entries
from raftflow import Engine


def _start_many(engine: Engine, starts: Sequence[Callable[[], Any]]) -> list[Any]:
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda f: f(), starts))


def _count(ctx: Context, sql: str, *params: Any) -> int:
    rows = ctx.cluster.query(sql, *params)
    return int(rows[0][0]) if rows else 0


def _wait_count(ctx: Context, label: str, sql: str, want: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = _count(ctx, sql)
        ctx.progress.update(f"{label}: {got:,}/{want:,}")
        if got >= want:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{label}: {got}/{want} after {timeout}s")
        time.sleep(0.2)


def _prefix(column: str, prefix: str) -> str:
    return f"substr({column}, 1, {len(prefix)}) = '{prefix}'"


def _window(ctx: Context, children: list[Child], marks: list[int]) -> tuple[int, int, int, int]:
    """Sleep ``wait_window`` between two marks of the workers: the leader's applied index
    over it, the elections, and the two mark numbers (the workers' counted requests)."""
    a = mark(children, marks)
    first = ctx.cluster.raft_mark()
    time.sleep(ctx.settings.wait_window)
    last = ctx.cluster.raft_mark()
    b = mark(children, marks)
    return last.applied_index - first.applied_index, last.term - first.term, a, b


def _sleepers(ctx: Context, engine: Engine, tag: str, count: int) -> dict[str, Any]:
    """``count`` executions sleeping a random 1-5 s: how late each one's next step began."""
    progress = ctx.progress
    progress.start(f"timers: {count:,} sleepers of 1-5 s")
    rng = random.Random(count)
    prefix = f"{tag}-nap{count}-"
    ids = [f"{prefix}{i}" for i in range(count)]
    durations = [round(rng.uniform(1.0, 5.0), 3) for _ in ids]
    began = time.monotonic()
    _start_many(
        engine,
        [
            partial(engine.start, app.nap, d, execution_id=i)
            for i, d in zip(ids, durations, strict=True)
        ],
    )
    started = time.monotonic() - began
    _wait_count(
        ctx,
        "done",
        f"SELECT COUNT(*) FROM executions WHERE {_prefix('id', prefix)} AND status = 'succeeded'",
        count,
        ctx.settings.phase_timeout,
    )
    seconds = time.monotonic() - began
    rows = ctx.cluster.query(
        "SELECT z.wake_at, t.started_at FROM steps AS z JOIN steps AS t "
        "ON t.execution_id = z.execution_id AND t.idx = z.idx + 1 "
        f"WHERE z.kind = 'sleep' AND {_prefix('z.execution_id', prefix)}"
    )
    late = [started_at - wake_at for wake_at, started_at in rows]
    summary = latency.summary_ms(late)
    out = {
        "sleepers": count,
        "start_seconds": round(started, 2),
        "seconds": round(seconds, 2),
        "woke": len(late),
        "early": sum(1 for x in late if x < 0),
        "lateness": summary,
    }
    progress.done(
        f"lateness p50 {summary['p50_ms']} ms, p99 {summary['p99_ms']} ms, "
        f"{out['early']} early, {out['woke']}/{count} woke (started in {started:.1f}s)"
    )
    return out


def run_waiting(ctx: Context, engine: Engine, children: list[Child], marks: list[int]) -> Figures:
    """Idle and waiting windows, sends and cancels, the sleepers; see the module doc."""
    s = ctx.settings
    progress = ctx.progress
    progress.start(f"timers: idle vs {s.waiting:,} waiting")
    idle, idle_elections, i0, i1 = _window(ctx, children, marks)
    tag = f"w{int(time.time() * 1000)}"
    half = s.waiting // 2
    sleepers = [f"{tag}-sleep-{i}" for i in range(half)]
    listeners = [f"{tag}-recv-{i}" for i in range(s.waiting - half)]
    _start_many(
        engine,
        [partial(engine.start, app.nap, 3600.0, execution_id=i) for i in sleepers]
        + [partial(engine.start, app.inbox, "go", execution_id=i) for i in listeners],
    )
    _wait_count(
        ctx,
        "parked",
        f"SELECT COUNT(*) FROM steps WHERE {_prefix('execution_id', tag + '-')} "
        "AND kind IN ('sleep', 'recv')",
        s.waiting,
        s.phase_timeout,
    )
    wait_weak(ctx, "SELECT COUNT(*) = 0 FROM messages WHERE locked_by <> '__parked__'")
    time.sleep(0.5)  # the last park's commit is applied everywhere
    waiting, waiting_elections, w0, w1 = _window(ctx, children, marks)
    progress.done(f"{idle} entries idle, {waiting} with {s.waiting:,} waiting")

    # The listeners are sent their message, the sleepers cancelled.
    progress.start(f"timers: {len(listeners):,} sends, {len(sleepers):,} cancels")
    began = time.monotonic()
    _start_many(
        engine,
        [partial(engine.send, i, 1, topic="go") for i in listeners]
        + [partial(engine.cancel, i) for i in sleepers],
    )
    _wait_count(
        ctx,
        "done",
        f"SELECT COUNT(*) FROM executions WHERE {_prefix('id', tag + '-')} "
        "AND status IN ('succeeded', 'cancelled')",
        s.waiting,
        s.phase_timeout,
    )
    cancelled = _count(
        ctx,
        "SELECT COUNT(*) FROM executions WHERE status = 'cancelled' AND "
        + _prefix("id", f"{tag}-sleep-"),
    )
    received = _count(
        ctx,
        "SELECT COUNT(*) FROM executions WHERE status = 'succeeded' AND "
        + _prefix("id", f"{tag}-recv-"),
    )
    ended = time.monotonic() - began
    progress.done(f"{received:,} received, {cancelled:,} cancelled in {ended:.1f}s")
    sizes = [n for n in (s.sleepers_light, s.sleepers) if n > 0]
    wakes = [_sleepers(ctx, engine, tag, n) for n in sizes]

    def figures(results: list[dict[str, Any]]) -> dict[str, Any]:
        idle_kinds = worker_entries(results, i0, i1)
        waiting_kinds = worker_entries(results, w0, w1)
        beats = sum(v for k, v in waiting_kinds.items() if k.startswith(BEAT_KINDS))
        return {
            "workers": s.workers,
            "concurrency": s.concurrency,
            "window_s": s.wait_window,
            "idle_entries": idle,
            "idle_by_kind": idle_kinds,
            "waiting": s.waiting,
            "waiting_entries": waiting,
            "waiting_by_kind": waiting_kinds,
            "waiting_beats": beats,
            # what the parked executions cost: the window's entries but the workers' beats
            "entries_per_waiting_execution": round(max(0, waiting - beats) / max(1, s.waiting), 4),
            "elections": idle_elections + waiting_elections,
            "cancelled": cancelled,
            "received": received,
            "wakes": wakes,
        }

    return figures
