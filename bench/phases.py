"""The phases of a default run: raw ceiling, raftflow, end-to-end latency, naive baseline.

Every measured phase has the same shape: start the child processes, wait until each says
``READY``, then take mark 1 (each child snapshots its counters; the parent reads the
leader's Raft applied index and every process's CPU time), run the workload, take mark 2
the same way. Rates and per-step costs are computed between the two marks only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import latency, naive, raw
from bench.children import Child, ChildError, kill_all, mark_all, stop_all, wait_all
from bench.cluster import BenchCluster, RaftMark
from bench.counting import COMMIT_KINDS, Tally, window
from bench.progress import Progress
from bench.sampler import Sampler, cores
from bench.settings import Settings

READY_TIMEOUT = 90.0


@dataclass
class Context:
    settings: Settings
    cluster: BenchCluster
    work_dir: Path
    progress: Progress
    tally: Tally  # the requests this (parent) process sends through raftflow


@dataclass
class Window:
    """What the parent saw at the two marks of a phase."""

    raft: tuple[RaftMark, RaftMark]
    cpu: tuple[dict[str, float], dict[str, float]]
    tally: tuple[dict[str, Any], dict[str, Any]]
    t: tuple[float, float]

    @property
    def seconds(self) -> float:
        return self.t[1] - self.t[0]

    def raft_entries(self) -> int:
        return self.raft[1].applied_index - self.raft[0].applied_index

    def elections(self) -> int:
        return self.raft[1].term - self.raft[0].term

    def cores(self) -> dict[str, float]:
        return cores(self.cpu[0], self.cpu[1], self.seconds)

    def parent_raft_entries(self) -> int:
        return int(sum(window(self.tally[0], self.tally[1], "raft").values()))


class Measured:
    """Takes the marks of a phase over a set of children."""

    def __init__(self, ctx: Context, children: Sequence[Child], sampler: Sampler) -> None:
        self.ctx, self.children, self.sampler = ctx, children, sampler
        self._first: tuple[RaftMark, dict[str, float], dict[str, Any], float] | None = None

    def begin(self) -> RaftMark:
        raft = self.ctx.cluster.raft_mark()
        cpu = self.sampler.cpu()
        tally = self.ctx.tally.snapshot()
        mark_all(self.children, 1)
        self._first = (raft, cpu, tally, time.time())
        self.sampler.sample()
        return raft

    def end(self, *, settle: bool = True) -> Window:
        """The second marks. ``settle`` first waits for the Raft log to go quiet, for a
        phase whose work is over (its last entries counted); a phase still writing (the
        raw clients) would only wait out the settle's timeout."""
        assert self._first is not None
        if settle:
            self.ctx.cluster.settle()
        mark_all(self.children, 2)
        self.sampler.sample()
        t1 = time.time()
        cpu = self.sampler.cpu()
        tally = self.ctx.tally.snapshot()
        raft = self.ctx.cluster.raft_mark()
        raft0, cpu0, tally0, t0 = self._first
        return Window((raft0, raft), (cpu0, cpu), (tally0, tally), (t0, t1))


def _spawn(ctx: Context, make: Callable[[int], Child], count: int) -> list[Child]:
    children: list[Child] = []
    try:
        for i in range(count):
            children.append(make(i))
        wait_all(children, "READY", READY_TIMEOUT)
    except BaseException:
        kill_all(children)
        raise
    return children


def _check_alive(children: Sequence[Child]) -> None:
    for child in children:
        if child.process.poll() is not None:
            raise ChildError(f"{child.name} exited ({child.process.returncode}){child.tail()}")


def _sampler(ctx: Context, children: Sequence[Child], interval: float = 0.5) -> Sampler:
    return Sampler(
        {
            "rqlite": ctx.cluster.node_pids,
            "workers": [c.pid for c in children],
            "bench": [os.getpid()],
        },
        interval=interval,
    )


# ------------------------------------------------------------------------------ raw


def run_raw(
    ctx: Context,
    processes: int,
    clients: int,
    label: str,
    *,
    duration: float | None = None,
    samples_into: list[float] | None = None,
) -> dict[str, Any]:
    """Single-statement writes/s from ``processes`` x ``clients`` kept-alive clients, for
    ``duration`` seconds (the settings' by default); each write's latency is appended to
    ``samples_into`` when given (a caller pooling several windows)."""
    ctx.cluster.execute([[raw.SCHEMA]])
    progress = ctx.progress
    progress.start(f"raw ceiling, {label}")

    def make(i: int) -> Child:
        node = ctx.cluster.nodes[i % len(ctx.cluster.nodes)]
        args = ["--url", node.url, "--concurrency", str(clients), "--name", f"{label}.{i}"]
        return Child(f"raw-{label}-{i}", "bench.raw", args, ctx.work_dir)

    children = _spawn(ctx, make, processes)
    try:
        with _sampler(ctx, children) as sampler:
            measured = Measured(ctx, children, sampler)
            start_index = measured.begin().applied_index
            deadline = time.monotonic() + (ctx.settings.duration if duration is None else duration)
            while time.monotonic() < deadline:
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
                _check_alive(children)
                done = ctx.cluster.raft_mark().applied_index - start_index
                progress.update(f"{done:,} writes")
            # The clients write until stopped: their own marks count them.
            win = measured.end(settle=False)
        results = stop_all(children)
    finally:
        kill_all(children)
    writes = 0
    rate = 0.0
    errors = 0
    samples: list[float] = []
    for result in results:
        m1, m2 = result["marks"][0], result["marks"][1]
        ok = m2["ok"] - m1["ok"]
        writes += ok
        errors += m2["errors"] - m1["errors"]
        rate += ok / (m2["t"] - m1["t"])
        samples.extend(result["latencies"][m1["samples"] : m2["samples"]])
    if samples_into is not None:
        samples_into.extend(samples)
    out: dict[str, Any] = {
        "processes": processes,
        "clients_per_process": clients,
        "clients": processes * clients,
        "entry": [ctx.cluster.entry_node(i) for i in range(processes)],
        "seconds": round(win.seconds, 3),
        "writes": writes,
        "errors": errors,
        "writes_per_s": round(rate, 1),
        "latency": latency.summary_ms(samples),
        "raft_entries": win.raft_entries(),
        "elections": win.elections(),
        "cpu_cores": win.cores(),
    }
    progress.done(f"{out['writes_per_s']:,.0f} writes/s (p50 {out['latency']['p50_ms']} ms)")
    return out


# ------------------------------------------------------------------------------ raftflow


def _worker_args(ctx: Context, i: int) -> list[str]:
    s = ctx.settings
    args = ["--url", ctx.cluster.entry_url(i), "--concurrency", str(s.concurrency)]
    args += ["--worker-id", f"bench-{i}"]
    for option in s.worker_options:
        args += ["--option", option]
    return args


def start_workers(ctx: Context, count: int, *, samples: bool = True) -> list[Child]:
    extra = [] if samples else ["--no-samples"]
    return _spawn(
        ctx,
        lambda i: Child(
            f"worker-{i}", "bench.worker", [*_worker_args(ctx, i), *extra], ctx.work_dir
        ),
        count,
    )


def start_executions(
    ctx: Context,
    engine: Any,
    count: int,
    steps: int,
    label: str,
    on_progress: Callable[[], None] | None = None,
    transactions: bool = False,
) -> tuple[list[str], str]:
    from bench import app

    workflow: Any = app.chain_sync if ctx.settings.sync else app.chain
    spec: Any = app.Chain(steps=steps, sleep=ctx.settings.step_sleep)
    if transactions:
        workflow = app.ledger_chain
    ids = []
    for i in range(count):
        if transactions:
            spec = app.Ledger(steps=steps, account=f"acct-{i}")
        ids.append(engine.start(workflow, spec).id)
        if i % 50 == 0:
            ctx.progress.update(f"{label}: started {i + 1:,}/{count:,} executions")
            if on_progress is not None:
                on_progress()
    return ids, "ledger" if transactions else workflow.__name__


def wait_raftflow(
    ctx: Context,
    children: Sequence[Child],
    executions: int,
    total_steps: int,
    on_poll: Callable[[float, int], None] | None = None,
    interval: float = 0.25,
    workflow: str | None = None,
) -> None:
    """Poll (weak reads, no Raft entry) until every execution (of ``workflow``) has
    finished."""
    deadline = time.monotonic() + ctx.settings.phase_timeout
    while True:
        steps, finished = ctx.cluster.query(
            "SELECT (SELECT COUNT(*) FROM steps), "
            "COALESCE(SUM(status IN ('succeeded', 'failed')), 0) FROM executions"
            " WHERE workflow = ? OR ? IS NULL",
            workflow,
            workflow,
        )[0]
        if on_poll is not None:
            on_poll(time.time(), int(steps))
        ctx.progress.update(f"{int(steps):,}/{total_steps:,} steps")
        if int(finished) >= executions:
            return
        _check_alive(children)
        if time.monotonic() > deadline:
            raise TimeoutError(f"raftflow: {steps}/{total_steps} steps after the phase timeout")
        time.sleep(interval)


def step_rows(ctx: Context, workflow: str, table: str = "steps") -> list[latency.StepRow]:
    rows = ctx.cluster.query(
        "SELECT s.execution_id, s.idx, s.started_at, s.ended_at FROM steps AS s "
        "JOIN executions AS e ON e.id = s.execution_id WHERE e.workflow = ?",
        workflow,
    )
    return [(r[0], int(r[1]), float(r[2]), float(r[3])) for r in rows]


def worker_window(results: Sequence[dict[str, Any]], first: int = 0) -> dict[str, Any]:
    """Counters of the worker processes between their marks ``first`` and ``first + 1``."""
    stats: dict[str, int] = {}
    requests: dict[str, float] = {}
    raft: dict[str, float] = {}
    statements: dict[str, float] = {}
    seconds: dict[str, float] = {}
    failed: dict[str, float] = {}
    samples: dict[str, list[float]] = {}
    round_trips = 0
    in_flight: list[float] = []
    cpu = 0.0
    for result in results:
        m1, m2 = result["marks"][first], result["marks"][first + 1]
        for key, value in m2.get("stats", {}).items():
            if isinstance(value, int):
                stats[key] = stats.get(key, 0) + value - m1["stats"][key]
        for target, key in (
            (requests, "requests"),
            (raft, "raft"),
            (statements, "statements"),
            (seconds, "seconds"),
            (failed, "failed"),
        ):
            for kind, value in window(m1["tally"], m2["tally"], key).items():
                target[kind] = target.get(kind, 0) + value
        round_trips += m2["round_trips"] - m1["round_trips"]
        for kind, values in result.get("samples", {}).items():
            lo = m1["tally"]["samples"].get(kind, 0)
            hi = m2["tally"]["samples"].get(kind, 0)
            samples.setdefault(kind, []).extend(values[lo:hi])
        span = m2["t"] - m1["t"]
        commit_seconds = sum(
            m2["tally"]["seconds"].get(kind, 0.0) - m1["tally"]["seconds"].get(kind, 0.0)
            for kind in COMMIT_KINDS
        )
        in_flight.append(commit_seconds / span if span > 0 else 0.0)
        cpu += (m2["cpu"]["user"] + m2["cpu"]["system"]) - (m1["cpu"]["user"] + m1["cpu"]["system"])
    return {
        "stats": stats,
        "requests": requests,
        "raft": raft,
        "statements": statements,
        "seconds": seconds,
        "failed": failed,
        "samples": samples,
        "round_trips": round_trips,
        # Little's law: time spent in commit requests / time = mean requests in flight.
        "commit_requests_in_flight": [round(b, 3) for b in in_flight],
        "cpu_seconds": cpu,
    }


def _per_step(counts: dict[str, float], steps: int) -> dict[str, float]:
    return {k: round(v / steps, 4) for k, v in sorted(counts.items())} if steps else {}


def _accounting(
    counted: dict[str, Any],
    win: Any,
    steps: int,
    worker_raft: int,
    client_raft: int,
    applied: int,
) -> dict[str, Any]:
    """Requests, Raft entries, round trips and CPU per step: the same for every phase."""
    return {
        "requests_per_step": _per_step(counted["requests"], steps),
        "raft_entries_workers": worker_raft,
        "raft_entries_client": client_raft,
        "raft_entries_applied": applied,
        "raft_entries_unattributed": applied - worker_raft - client_raft,
        "elections": win.elections(),
        "raft_per_step": round(worker_raft / steps, 4) if steps else None,
        "raft_per_step_applied": round(applied / steps, 4) if steps else None,
        "round_trips": counted["round_trips"],
        "round_trips_per_step": round(counted["round_trips"] / steps, 4) if steps else None,
        "seconds": round(win.seconds, 3),
        "cpu_cores": win.cores(),
        "worker_cpu_seconds_per_1k_steps": round(counted["cpu_seconds"] / steps * 1000, 3)
        if steps
        else None,
    }


def raftflow_summary(
    ctx: Context,
    win: Window,
    results: Sequence[dict[str, Any]],
    rows: Sequence[latency.StepRow],
    executions: tuple[int, float],
) -> dict[str, Any]:
    counted = worker_window(results)
    steps = len(rows)
    worker_raft = int(sum(counted["raft"].values()))
    parent_raft = win.parent_raft_entries()
    applied = win.raft_entries()
    commits = counted["stats"].get("commits", 0)
    commit_requests = counted["stats"].get("commit_requests", 0)
    throughput = latency.throughput(rows)
    count, span = executions
    options = results[0].get("options", {}) if results else {}
    # Turns end every steps_per_turn steps only when workers hand them back regardless;
    # by default a turn goes on while nothing else waits, and step indexes say nothing.
    turn = options.get("steps_per_turn") if options.get("yield_idle_turns") else None
    return {
        "workers": ctx.settings.workers,
        "concurrency": ctx.settings.concurrency,
        "executions": count,
        "steps": steps,
        "worker_steps": counted["stats"].get("steps", 0),
        **throughput,
        "executions_per_s": round(count / span, 1) if span > 0 else 0.0,
        **latency.gap_summaries(rows, turn),
        "step_start_to_commit_sent": latency.summary_ms(latency.step_durations(rows)),
        "commit_request": latency.summary_ms(
            [t for kind in COMMIT_KINDS for t in counted["samples"].get(kind, [])]
        ),
        "commit_wait": latency.summary_ms(counted["samples"].get("commit.wait", [])),
        "claim_request": latency.summary_ms(counted["samples"].get("queue.claim", [])),
        "commits": commits,
        "commit_requests": commit_requests,
        "commits_per_request": round(commits / commit_requests, 2) if commit_requests else None,
        "commit_requests_in_flight": counted["commit_requests_in_flight"],
        "worker_stats": counted["stats"],
        "requests_by_kind": counted["requests"],
        "raft_by_kind": counted["raft"],
        "failed_requests": counted["failed"],
        **_accounting(counted, win, steps, worker_raft, parent_raft, applied),
        "raft": [win.raft[0].as_json(), win.raft[1].as_json()],
    }


def run_raftflow(ctx: Context, engine: Any, transactions: bool = False) -> dict[str, Any]:
    """The E x K workload; with ``transactions`` each step is a transaction step that
    debits its execution's account and appends a ledger row (the ``transactions``
    phase), and the ledger is checked afterwards: debited exactly once per step."""
    s = ctx.settings
    progress = ctx.progress
    label = "transactions" if transactions else "raftflow"
    progress.start(f"{label}, {s.workers}x{s.concurrency}, {s.executions}x{s.steps}")
    if transactions:
        from bench import app

        engine.create_tables(app.metadata)
        ctx.cluster.execute(
            [["DELETE FROM bench_ledger"], ["DELETE FROM bench_accounts"]]
            + [
                ["INSERT INTO bench_accounts (id, balance) VALUES (?, ?)", f"acct-{i}", s.steps]
                for i in range(s.executions)
            ]
        )
    children = start_workers(ctx, s.workers)
    e2e: dict[str, Any] | None = None
    try:
        with _sampler(ctx, children) as sampler:
            measured = Measured(ctx, children, sampler)
            measured.begin()
            _ids, workflow = start_executions(
                ctx, engine, s.executions, s.steps, label, transactions=transactions
            )
            wait_raftflow(ctx, children, s.executions, s.total_steps, workflow=workflow)
            win = measured.end()
            rss = sampler.rss_summary("workers", win.t[0], win.t[1])
            progress.done(f"{s.total_steps:,} steps in {win.seconds:.1f}s")
            if "e2e" in s.phases and not transactions:
                e2e = run_e2e(ctx, engine, children)
            rss_all = sampler.rss_summary("workers")
        results = stop_all(children)
    finally:
        kill_all(children)
    rows = step_rows(ctx, workflow)
    stamps = ctx.cluster.query(
        "SELECT MIN(created_at), MAX(completed_at), COUNT(*), "
        "SUM(status = 'succeeded') FROM executions WHERE workflow = ?",
        workflow,
    )[0]
    summary = raftflow_summary(
        ctx, win, results, rows, (int(stamps[2]), float(stamps[1]) - float(stamps[0]))
    )
    summary["succeeded"] = int(stamps[3])
    summary["workflow"] = workflow
    summary["worker_rss"] = rss
    summary["worker_rss_whole_phase"] = rss_all
    summary["worker_options"] = results[0].get("options", {}) if results else {}
    if e2e is not None:
        summary["e2e"] = e2e
    if transactions:
        rows_, balance = ctx.cluster.query(
            "SELECT (SELECT COUNT(*) FROM bench_ledger),"
            " (SELECT COALESCE(SUM(balance), 0) FROM bench_accounts)",
            level="strong",
        )[0]
        doubled = ctx.cluster.query(
            "SELECT COUNT(*) FROM (SELECT 1 FROM bench_ledger GROUP BY account, idx"
            " HAVING COUNT(*) > 1)",
            level="strong",
        )[0][0]
        summary["ledger"] = {
            "rows": int(rows_),
            "balance_left": int(balance),
            "doubled": int(doubled),
            "exactly_once": int(rows_) == s.total_steps and int(balance) == 0 and not doubled,
        }
    return summary


def run_e2e(ctx: Context, engine: Any, children: Sequence[Child]) -> dict[str, Any]:
    """start() -> result() of a 1-step workflow, one at a time, on the idle workers."""
    from bench import app

    progress = ctx.progress
    progress.start("end-to-end, 1-step workflow")
    samples: list[float] = []
    ids: list[str] = []
    for i in range(ctx.settings.e2e_samples):
        _check_alive(children)
        started = time.perf_counter()
        handle = engine.start(app.one, i)
        handle.result(timeout=60)
        samples.append(time.perf_counter() - started)
        ids.append(handle.id)
        progress.update(f"{i + 1}/{ctx.settings.e2e_samples}")
    stamps = ctx.cluster.query(
        "SELECT completed_at - created_at FROM executions WHERE workflow = 'one'"
    )
    out: dict[str, Any] = {
        "samples": len(samples),
        "client": latency.summary_ms(samples),
        "stored_created_to_completed": latency.summary_ms([float(r[0]) for r in stamps]),
    }
    progress.done(f"p50 {out['client']['p50_ms']} ms, p99 {out['client']['p99_ms']} ms")
    return out


# ------------------------------------------------------------------------------ naive


def run_naive(ctx: Context) -> dict[str, Any]:
    s = ctx.settings
    progress = ctx.progress
    progress.start(f"naive spec, {s.workers}x{s.concurrency}, {s.executions}x{s.steps}")
    ctx.cluster.execute([[sql] for sql in naive.SCHEMA])

    def make(i: int) -> Child:
        node = ctx.cluster.nodes[i % len(ctx.cluster.nodes)]
        args = ["--url", node.url, "--concurrency", str(s.concurrency)]
        return Child(
            f"naive-{i}", "bench.naive", [*args, "--worker-id", f"naive-{i}"], ctx.work_dir
        )

    children = _spawn(ctx, make, s.workers)
    try:
        with _sampler(ctx, children) as sampler:
            measured = Measured(ctx, children, sampler)
            measured.begin()
            started_at = time.time()
            for i in range(s.executions):
                ctx.cluster.execute(
                    naive.publish_statements(f"naive-{i}", 0, s.steps, s.step_sleep)
                )
            published = s.executions  # one request (one Raft entry) each
            deadline = time.monotonic() + s.phase_timeout
            while True:
                done = int(ctx.cluster.scalar("SELECT COUNT(*) FROM naive_checkpoints"))
                progress.update(f"{done:,}/{s.total_steps:,} steps")
                if done >= s.total_steps:
                    break
                _check_alive(children)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"naive: {done}/{s.total_steps} steps after the timeout")
                time.sleep(0.25)
            win = measured.end()
            rss = sampler.rss_summary("workers", win.t[0], win.t[1])
        results = stop_all(children)
    finally:
        kill_all(children)
    rows = [
        (r[0], int(r[1]), float(r[2]), float(r[3]))
        for r in ctx.cluster.query(
            "SELECT execution_id, idx, started_at, ended_at FROM naive_checkpoints"
        )
    ]
    counted = worker_window(results)
    steps = len(rows)
    worker_raft = int(sum(counted["raft"].values()))
    applied = win.raft_entries()
    last_end = max((r[3] for r in rows), default=started_at)
    summary = {
        "workers": s.workers,
        "concurrency": s.concurrency,
        "executions": s.executions,
        "steps": steps,
        **latency.throughput(rows),
        "executions_per_s": round(s.executions / (last_end - started_at), 1),
        "step_to_step": latency.summary_ms(latency.step_gaps(rows)["all"]),
        "claim_request": latency.summary_ms(counted["samples"].get("naive.claim", [])),
        "requests_by_kind": counted["requests"],
        **_accounting(counted, win, steps, worker_raft, published, applied),
        "worker_rss": rss,
        "raft": [win.raft[0].as_json(), win.raft[1].as_json()],
    }
    progress.done(
        f"{steps:,} steps, {summary['steady_steps_per_s']:,.0f} steps/s, "
        f"{summary['raft_per_step']} Raft entries/step"
    )
    return summary
