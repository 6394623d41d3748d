"""The timers phase, part 1 (:mod:`bench.timers`): the Raft entries each durable primitive
adds to a 1-step workflow, counted by kind on one worker process running executions one
at a time."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench import app
from bench.children import Child
from bench.counting import window
from bench.phases import Context
from bench.timers_common import BEAT_KINDS, Figures, mark, wait_weak, worker_entries
from raftflow import Engine, WorkflowCancelledError


def _entries(before: dict[str, Any], after: dict[str, Any]) -> Counter[str]:
    raft = window(before, after, "raft")
    return Counter({k: int(v) for k, v in raft.items() if not k.startswith(BEAT_KINDS)})


def _waiting(ctx: Context, execution_id: str, kind: str) -> None:
    wait_weak(
        ctx,
        "SELECT COUNT(*) FROM steps WHERE execution_id = ? AND kind = ? AND status = 'waiting'",
        execution_id,
        kind,
    )


def _parked(ctx: Context, execution_id: str) -> None:
    wait_weak(
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
    elif case == "stream x10":
        assert engine.start(app.streamer, n).result(timeout=60) == n
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
    "stream x10": ("write_stream() 10 values, then the step", "baseline"),
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
        a = mark(children, marks)
        first = ctx.cluster.raft_mark()
        for n in range(count):
            _one_run(engine, case, ctx, n)
            ctx.progress.update(f"{case} {n + 1}/{count}")
        _quiet(ctx)
        b = mark(children, marks)
        applied = ctx.cluster.raft_mark().applied_index - first.applied_index
        spans[case] = (a, b, _entries(before, ctx.tally.snapshot()), applied, count)
    ctx.progress.done(f"{len(spans)} cases counted")

    def figures(results: list[dict[str, Any]]) -> dict[str, Any]:
        rows: dict[str, dict[str, Any]] = {}
        for case, (a, b, client, applied, count) in spans.items():
            worker = Counter(worker_entries(results, a, b))
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


def _quiet(ctx: Context) -> None:
    """Nothing left in the queue: every execution's last request is done."""
    wait_weak(ctx, "SELECT COUNT(*) = 0 FROM messages")
