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

import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from bench import app, latency
from bench.children import Child, kill_all, mark_all, stop_all
from bench.counting import window
from bench.phases import Context, start_workers
from raftflow import Engine, WorkflowCancelledError

BEAT_KINDS = ("ops.",)  # presence beats: a worker's, whatever it runs

#: Makes a part's figures from the workers' final results (their counters at each mark).
Figures = Callable[[list[dict[str, Any]]], dict[str, Any]]


# ----------------------------------------------------------------- entries per primitive


def _entries(before: dict[str, Any], after: dict[str, Any]) -> Counter[str]:
    raft = window(before, after, "raft")
    return Counter({k: int(v) for k, v in raft.items() if not k.startswith(BEAT_KINDS)})


def _wait_weak(ctx: Context, sql: str, *params: Any, timeout: float = 30.0) -> None:
    """Poll the cluster with plain weak reads (no Raft entry, not counted) until ``sql``
    returns a row whose first value is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        rows = ctx.cluster.query(sql, *params)
        if rows and rows[0][0]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {sql!r} {params}")
        time.sleep(0.02)


def _waiting(ctx: Context, execution_id: str, kind: str) -> None:
    _wait_weak(
        ctx,
        "SELECT COUNT(*) FROM steps WHERE execution_id = ? AND kind = ? AND status = 'waiting'",
        execution_id,
        kind,
    )


def _parked(ctx: Context, execution_id: str) -> None:
    _wait_weak(
        ctx,
        "SELECT COUNT(*) FROM messages WHERE group_id = ? AND locked_by = '__parked__'",
        execution_id,
    )


def _one_run(engine: Engine, case: str, ctx: Context, n: int) -> None:
    """One execution of ``case``, start to finish (or cancel)."""
    if case == "baseline":
        assert engine.start(app.one, n).result(timeout=60) == n
    elif case == "sleep 0.3s":
        assert engine.start(app.nap, 0.3).result(timeout=60) == 1
    elif case == "sleep 2s":
        assert engine.start(app.nap, 2.0).result(timeout=60) == 1
    elif case == "recv+send":
        handle = engine.start(app.inbox, "go")
        _waiting(ctx, handle.id, "recv")
        engine.send(handle.id, n, topic="go")
        assert handle.result(timeout=60) == n
    elif case == "child":
        assert engine.start(app.parent, n).result(timeout=60) == n
    elif case == "cancel":
        handle = engine.start(app.nap, 3600.0)
        _parked(ctx, handle.id)
        engine.cancel(handle.id)
        try:
            handle.result(timeout=60)
        except WorkflowCancelledError:
            pass
        else:
            raise RuntimeError("a cancelled nap succeeded")
    elif case == "retry 0.1s":
        assert engine.start(app.flaky, app.Flaky(fail_times=1)).result(timeout=60) == 2
    elif case == "retry 2s":
        spec = app.Flaky(fail_times=1, parked=True)
        assert engine.start(app.flaky, spec).result(timeout=60) == 2
    else:
        raise ValueError(case)


#: case -> (what it is, the baseline it is set against)
CASES: dict[str, tuple[str, str]] = {
    "baseline": ("1-step workflow: start, claim, step + finish", ""),
    "sleep 0.3s": ("sleep(0.3) then the step (a short wait: in place)", "baseline"),
    "sleep 2s": ("sleep(2) then the step (parked, woken by its deadline)", "baseline"),
    "recv+send": ("recv() parked, a client send(), then the step", "baseline"),
    "child": ("start a 1-step child, wait for its result", "baseline"),
    "cancel": ("sleep(3600), parked, cancelled by a client", "baseline"),
    "retry 0.1s": ("a step failing once, retried after 0.1 s (in place)", "baseline"),
    "retry 2s": ("a step failing once, retried after 2 s (parked)", "baseline"),
}


def run_primitive_costs(
    ctx: Context, engine: Engine, children: list[Child], marks: list[int]
) -> Figures:
    """Raft entries of each case per execution, counted by kind; see the module doc.
    Returns a function of the workers' final results that makes the figures."""
    s = ctx.settings
    repeats = s.primitive_repeats
    ctx.progress.start("timers: Raft entries per primitive")
    spans: dict[str, tuple[int, int, Counter[str], int, int]] = {}
    for case in CASES:
        count = max(1, repeats // 2) if case in ("retry 2s", "sleep 2s") else repeats
        if not spans:  # warm: imports, connections, the first claim
            _one_run(engine, "baseline", ctx, -1)
        _quiet(ctx)
        before = ctx.tally.snapshot()
        a = _mark(children, marks)
        first = ctx.cluster.raft_mark()
        for n in range(count):
            _one_run(engine, case, ctx, n)
            ctx.progress.update(f"{case} {n + 1}/{count}")
        _quiet(ctx)
        b = _mark(children, marks)
        applied = ctx.cluster.raft_mark().applied_index - first.applied_index
        spans[case] = (a, b, _entries(before, ctx.tally.snapshot()), applied, count)
    ctx.progress.done(f"{len(spans)} cases counted")

    def figures(results: list[dict[str, Any]]) -> dict[str, Any]:
        rows: dict[str, dict[str, Any]] = {}
        for case, (a, b, client, applied, count) in spans.items():
            worker = Counter(_worker_entries(results, a, b))
            worker = Counter({k: v for k, v in worker.items() if not k.startswith(BEAT_KINDS)})
            kinds = client + worker
            rows[case] = {
                "what": CASES[case][0],
                "executions": count,
                "entries_per_execution": round(sum(kinds.values()) / count, 2),
                "client_per_execution": round(sum(client.values()) / count, 2),
                "worker_per_execution": round(sum(worker.values()) / count, 2),
                "by_kind": {k: round(v / count, 2) for k, v in sorted(kinds.items())},
                # the leader's own count, beats included: a check on the counting
                "applied_per_execution": round(applied / count, 2),
            }
        for case, row in rows.items():
            base = CASES[case][1]
            row["against"] = base or None
            row["extra"] = (
                round(row["entries_per_execution"] - rows[base]["entries_per_execution"], 2)
                if base
                else None
            )
        return {"repeats": repeats, "cases": rows}

    return figures


def _mark(children: list[Child], marks: list[int]) -> int:
    """Snapshot every worker's counters (``bench.worker``'s SIGUSR1); the mark's number."""
    marks[0] += 1
    mark_all(children, marks[0])
    return marks[0]


def _quiet(ctx: Context) -> None:
    """Nothing left in the queue: every execution's last request is done."""
    _wait_weak(ctx, "SELECT COUNT(*) = 0 FROM messages")


# ------------------------------------------------------------------ waiting and waking


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
    a = _mark(children, marks)
    first = ctx.cluster.raft_mark()
    time.sleep(ctx.settings.wait_window)
    last = ctx.cluster.raft_mark()
    b = _mark(children, marks)
    return last.applied_index - first.applied_index, last.term - first.term, a, b


def _worker_entries(results: list[dict[str, Any]], a: int, b: int) -> dict[str, int]:
    """The workers' Raft entries between their marks ``a`` and ``b``, by kind."""
    total: Counter[str] = Counter()
    for result in results:
        raft = window(result["marks"][a - 1]["tally"], result["marks"][b - 1]["tally"], "raft")
        total.update({k: int(v) for k, v in raft.items()})
    return dict(total)


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
    _wait_weak(ctx, "SELECT COUNT(*) = 0 FROM messages WHERE locked_by <> '__parked__'")
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
        idle_kinds = _worker_entries(results, i0, i1)
        waiting_kinds = _worker_entries(results, w0, w1)
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
