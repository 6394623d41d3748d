"""``python -m bench --mode long``: the cost of a step as one execution's history grows.

One execution of N trivial sync steps in a loop, run by one in-process worker of
concurrency 1 (``engine.running_worker``), for each N of ``long_sizes`` on embedded SQLite
(a fresh file per run) and of ``long_rqlite_sizes`` on the local 3-node rqlite cluster;
each twice: with sticky continuation (the default ``sticky_cache``) and with
``sticky_cache=0`` (every turn a claim that reads the history and replays the workflow
from the start: the cost "Long executions" set out to remove).

Per run: the total time and time per step, the mean step-to-step time over the first and
the last ``window`` steps (window = N/10, at most 500) and their ratio, the worker's
claims and how many of them resumed a kept run instead of replaying, the step records
those claims read back (the claim's own read and the pages of a long history: 0 when
every claim resumes), and on rqlite the Raft entries per step (the leader's applied index
over the run).
"""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.phases import Context
from raftflow import Engine
from raftflow.errors import ResultTimeoutError

STEPS_PER_TURN = 16  # the WorkerOptions default; handed back even with nothing waiting

#: The statements whose rows are an execution's recorded history, read by a claim.
HISTORY_READS = ("store.claimed_steps", "store.steps_page")


class HistoryRows:
    """Counts the step records that requests of this process read back (the claims' own
    read and the pages of a long history), by wrapping the connections' ``send`` for the
    duration of a ``with`` block."""

    def __init__(self) -> None:
        self.rows = 0
        self._lock = threading.Lock()
        self._saved: list[tuple[Any, Any]] = []

    def _count(self, request: Any, response: Any) -> None:
        rows = sum(
            len(result.rows)
            for statement, result in zip(request.statements, response.results, strict=False)
            if statement.name in HISTORY_READS
        )
        if rows:
            with self._lock:
                self.rows += rows

    def __enter__(self) -> HistoryRows:
        from raftflow.transports.rqlite.client import AsyncRqliteConnection
        from raftflow.transports.sqlite.connection import SqliteConnection

        sync_send, async_send = SqliteConnection.send, AsyncRqliteConnection.send
        counter = self

        def counted(conn: Any, request: Any) -> Any:
            response = sync_send(conn, request)
            counter._count(request, response)
            return response

        async def acounted(conn: Any, request: Any) -> Any:
            response = await async_send(conn, request)
            counter._count(request, response)
            return response

        self._saved = [(SqliteConnection, sync_send), (AsyncRqliteConnection, async_send)]
        SqliteConnection.send = counted  # type: ignore[method-assign]
        AsyncRqliteConnection.send = acounted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        for cls, send in self._saved:
            cls.send = send


@dataclass
class Chain:
    """A workflow of ``n`` trivial steps on ``engine``; each step notes when it ran."""

    engine: Engine
    times: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        times = self.times

        @self.engine.step(name="long_step")
        def step(i: int) -> int:
            times.append(time.perf_counter())
            return i

        @self.engine.workflow(name="long_chain")
        def chain(n: int) -> int:
            total = 0
            for i in range(n):
                total += step(i)
            return total

        self.workflow = chain


def window_of(n: int) -> int:
    return max(1, min(500, n // 10))


def run_one(
    ctx: Context, url: str, n: int, sticky_cache: int, *, rqlite: bool, label: str
) -> dict[str, Any]:
    """One execution of ``n`` steps on ``url``, one in-process worker; its figures."""
    engine = Engine.from_url(url)
    try:
        chain = Chain(engine)
        mark = ctx.cluster.raft_mark() if rqlite else None
        began = time.perf_counter()
        handle = engine.start(chain.workflow, n)
        with (
            HistoryRows() as history,
            engine.running_worker(
                concurrency=1,
                sticky_cache=sticky_cache,
                steps_per_turn=STEPS_PER_TURN,
                yield_idle_turns=True,  # a turn's end is what is measured
            ) as worker,
        ):
            deadline = time.monotonic() + ctx.settings.phase_timeout
            while True:
                try:
                    result = handle.result(timeout=5.0)
                    break
                except ResultTimeoutError:
                    pass
                ctx.progress.update(f"{label}: {len(chain.times):,}/{n:,} steps")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{label}: not done after {ctx.settings.phase_timeout}s")
            seconds = time.perf_counter() - began
            stats = worker.stats
        after = ctx.cluster.raft_mark() if rqlite else None
    finally:
        engine.close()
    if result != n * (n - 1) // 2 or len(chain.times) != n:
        raise RuntimeError(f"{label}: result {result}, {len(chain.times)} step runs for {n}")
    # step-to-step times (the first step's start-up latency left out)
    gaps = [b - a for a, b in itertools.pairwise(chain.times)] or [seconds]
    w = min(window_of(n), len(gaps))
    first, last = statistics.fmean(gaps[:w]) * 1e3, statistics.fmean(gaps[-w:]) * 1e3
    out: dict[str, Any] = {
        "n": n,
        "sticky_cache": sticky_cache,
        "seconds": round(seconds, 3),
        "per_step_ms": round(seconds / n * 1e3, 3),
        "window": w,
        "first_window_ms": round(first, 3),
        "last_window_ms": round(last, 3),
        "last_over_first": round(last / first, 2) if first > 0 else None,
        "claims": stats.claimed,
        "resumed": stats.resumed,
        "replays": stats.claimed - stats.resumed,
        "steps": stats.steps,
        "history_rows_read": history.rows,
    }
    if mark is not None and after is not None:
        entries = after.applied_index - mark.applied_index
        out["raft_entries"] = entries
        out["raft_per_step"] = round(entries / n, 3)
        out["elections"] = after.term - mark.term
    return out


def run_series(
    ctx: Context, url_of: Any, sizes: tuple[int, ...], backend: str, *, rqlite: bool
) -> list[dict[str, Any]]:
    rows = []
    for sticky_cache in (256, 0):
        for n in sizes:
            label = f"{backend} N={n:,} sticky_cache={sticky_cache}"
            ctx.progress.start(label)
            row = run_one(ctx, url_of(n, sticky_cache), n, sticky_cache, rqlite=rqlite, label=label)
            ctx.progress.done(
                f"{row['seconds']:.2f}s, {row['per_step_ms']:.2f} ms/step, last/first "
                f"{row['last_over_first']}, {row['resumed']}/{row['claims']} claims resumed"
            )
            rows.append({"backend": backend, **row})
    return rows


def growth(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-step time at the largest N over that at the smallest, per sticky setting."""
    out: dict[str, Any] = {}
    for sticky_cache in (256, 0):
        mine = [r for r in rows if r["sticky_cache"] == sticky_cache]
        if len(mine) >= 2:
            small, large = mine[0], mine[-1]
            out[f"sticky_{sticky_cache}"] = {
                "from_n": small["n"],
                "to_n": large["n"],
                "per_step_ratio": round(large["per_step_ms"] / small["per_step_ms"], 2),
            }
    return out


def run_long(ctx: Context) -> dict[str, Any]:
    s = ctx.settings
    sqlite_dir = ctx.work_dir / "long-sqlite"
    sqlite_dir.mkdir(parents=True, exist_ok=True)

    def sqlite_url(n: int, sticky_cache: int) -> str:
        path: Path = sqlite_dir / f"long-{n}-{sticky_cache}.db"
        return f"sqlite:///{path}"

    def rqlite_url(n: int, sticky_cache: int) -> str:
        return str(ctx.cluster.entry_url(0))

    sqlite_rows = run_series(ctx, sqlite_url, s.long_sizes, "sqlite", rqlite=False)
    rqlite_rows = run_series(ctx, rqlite_url, s.long_rqlite_sizes, "rqlite", rqlite=True)
    from bench.long_goals import run_goals

    return {
        "long": {
            "steps_per_turn": STEPS_PER_TURN,
            "rows": sqlite_rows + rqlite_rows,
            "growth": {"sqlite": growth(sqlite_rows), "rqlite": growth(rqlite_rows)},
            "goals": run_goals(ctx, sqlite_dir),
        }
    }


def phases(settings: Any) -> int:
    return 2 * (len(settings.long_sizes) + len(settings.long_rqlite_sizes)) + 2  # + the goals


def render(results: dict[str, Any]) -> str:
    data = results["long"]
    headers = [
        "backend",
        "N steps",
        "sticky",
        "total s",
        "ms/step",
        "first ms",
        "last ms",
        "last/first",
        "claims (resumed)",
        "history rows read",
        "Raft/step",
    ]
    rows = []
    for r in data["rows"]:
        rows.append(
            [
                r["backend"],
                f"{r['n']:,}",
                "on" if r["sticky_cache"] else "off (0)",
                f"{r['seconds']:.2f}",
                f"{r['per_step_ms']:.2f}",
                f"{r['first_window_ms']:.2f}",
                f"{r['last_window_ms']:.2f}",
                f"{r['last_over_first']}",
                f"{r['claims']} ({r['resumed']})",
                f"{r['history_rows_read']:,}",
                "-" if "raft_per_step" not in r else f"{r['raft_per_step']:.2f}",
            ]
        )
    from bench.report import _table, header

    lines = [
        header(results),
        f"one execution of N trivial sync steps, one in-process worker (concurrency 1, "
        f"{data['steps_per_turn']} steps per turn); first/last: mean step time over the "
        "first and the last N/10 steps (at most 500)",
        "",
        _table(headers, rows),
        "",
    ]
    for backend, per in data["growth"].items():
        for key, g in per.items():
            lines.append(
                f"{backend}, sticky_cache={key.split('_')[1]}: ms/step at N={g['to_n']:,} is "
                f"{g['per_step_ratio']}x that at N={g['from_n']:,}"
            )
    if "goals" in data:
        from bench.long_goals import render_goals

        lines += render_goals(data["goals"])
    return "\n".join(lines)
