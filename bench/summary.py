"""What a measured window of worker processes adds up to: their counters between two
marks (requests, Raft entries, round trips, CPU), per step, and the raftflow phase's
summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bench import latency
from bench.counting import COMMIT_KINDS, window

if TYPE_CHECKING:
    from bench.phases import Context, Window


def worker_window(results: Sequence[dict[str, Any]], first: int = 0) -> dict[str, Any]:
    """Counters of the worker processes between their marks ``first`` and ``first + 1``."""
    stats: dict[str, int] = {}
    requests: dict[str, float] = {}
    raft: dict[str, float] = {}
    statements: dict[str, float] = {}
    seconds: dict[str, float] = {}
    failed: dict[str, float] = {}
    clusters: dict[str, float] = {}
    clusters_raft: dict[str, float] = {}
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
            (clusters, "clusters"),
            (clusters_raft, "clusters_raft"),
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
        "clusters": clusters,
        "clusters_raft": clusters_raft,
        "samples": samples,
        "round_trips": round_trips,
        # Little's law: time spent in commit requests / time = mean requests in flight.
        "commit_requests_in_flight": [round(b, 3) for b in in_flight],
        "cpu_seconds": cpu,
    }


def _per_step(counts: dict[str, float], steps: int) -> dict[str, float]:
    return {k: round(v / steps, 4) for k, v in sorted(counts.items())} if steps else {}


def accounting(
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
        **accounting(counted, win, steps, worker_raft, parent_raft, applied),
        "raft": [win.raft[0].as_json(), win.raft[1].as_json()],
    }
