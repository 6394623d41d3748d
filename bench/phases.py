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

from bench import latency, raw
from bench.children import Child, ChildError, kill_all, mark_all, stop_all, wait_all
from bench.cluster import BenchCluster, RaftMark
from bench.counting import Tally, window
from bench.progress import Progress
from bench.sampler import Sampler, cores
from bench.settings import Settings
from bench.summary import raftflow_summary

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


def _worker_args(ctx: Context, i: int, url: str | None) -> list[str]:
    s = ctx.settings
    args = ["--url", url or ctx.cluster.entry_url(i), "--concurrency", str(s.concurrency)]
    args += ["--worker-id", f"bench-{i}"]
    for option in s.worker_options:
        args += ["--option", option]
    return args


def start_workers(
    ctx: Context, count: int, *, samples: bool = True, url: str | None = None
) -> list[Child]:
    """``count`` worker processes, on ``ctx.cluster`` (worker ``i`` entering through node
    ``i``) or on ``url`` (a sharded deployment's)."""
    extra = [] if samples else ["--no-samples"]
    return _spawn(
        ctx,
        lambda i: Child(
            f"worker-{i}", "bench.worker", [*_worker_args(ctx, i, url), *extra], ctx.work_dir
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
