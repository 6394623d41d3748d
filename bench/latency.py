"""Percentiles, step-to-step gaps and throughput from step records.

A step record is ``(execution_id, idx, started_at, ended_at)``. For raftflow these come
from the ``steps`` table: ``started_at`` is when the worker began the step and ``ended_at``
is the time its commit was sent (the committer stamps it), both on the cluster's clock
(:class:`raftflow.transports.db.clock.ClusterClock`). For the naive baseline they come from its
checkpoint table (the worker's wall clock; all processes share one machine).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

StepRow = tuple[str, int, float, float]


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100.0
    low, high = math.floor(k), math.ceil(k)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


def summary_ms(values: Sequence[float]) -> dict[str, Any]:
    """n, p50, p99, mean and max of durations given in seconds, in milliseconds."""
    if not values:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "mean_ms": None, "max_ms": None}
    return {
        "n": len(values),
        "p50_ms": round(percentile(values, 50) * 1000, 3),
        "p99_ms": round(percentile(values, 99) * 1000, 3),
        "mean_ms": round(sum(values) / len(values) * 1000, 3),
        "max_ms": round(max(values) * 1000, 3),
    }


def step_gaps(rows: Iterable[StepRow], turn: int | None = None) -> dict[str, list[float]]:
    """For consecutive steps of each execution: next step's start - this step's end.

    With ``turn`` (the workers' ``steps_per_turn``, when they hand every turn back at that
    length: ``yield_idle_turns``) the gaps are also split in two: a step whose index is a
    multiple of ``turn`` starts a new turn (its execution went back to the queue and was
    claimed again, possibly after waiting for a free slot); the others ran on the worker
    that still held the execution, without a claim.
    """
    by_execution: dict[str, list[StepRow]] = defaultdict(list)
    for row in rows:
        by_execution[row[0]].append(row)
    gaps: dict[str, list[float]] = {"all": [], "in_turn": [], "new_turn": []}
    for steps in by_execution.values():
        steps.sort(key=lambda r: r[1])
        for before, after in itertools.pairwise(steps):
            gap = after[2] - before[3]
            gaps["all"].append(gap)
            if turn:
                gaps["new_turn" if after[1] % turn == 0 else "in_turn"].append(gap)
    return gaps


def gap_summaries(rows: Iterable[StepRow], turn: int | None = None) -> dict[str, Any]:
    gaps = step_gaps(rows, turn)
    return {
        "step_to_step": summary_ms(gaps["all"]),
        "step_to_step_in_turn": summary_ms(gaps["in_turn"]),
        "step_to_step_new_turn": summary_ms(gaps["new_turn"]),
    }


def step_durations(rows: Iterable[StepRow]) -> list[float]:
    return [row[3] - row[2] for row in rows]


def throughput(rows: Sequence[StepRow]) -> dict[str, Any]:
    """Steps/s over the whole run (first start to last end) and in the steady middle:
    the steps that ended between the 10th and 90th percentile of end times, divided by
    that time (excludes the ramp-up while workers find the work and the tail where only
    the last executions run)."""
    if not rows:
        return {"steps": 0, "window_s": 0.0, "steps_per_s": 0.0, "steady_steps_per_s": 0.0}
    ends = sorted(r[3] for r in rows)
    first = min(r[2] for r in rows)
    window = ends[-1] - first
    lo, hi = int(len(ends) * 0.1), int(len(ends) * 0.9) - 1
    steady_span = ends[hi] - ends[lo] if hi > lo else 0.0
    return {
        "steps": len(rows),
        "window_s": round(window, 3),
        "steps_per_s": round(len(rows) / window, 1) if window > 0 else 0.0,
        "steady_steps_per_s": round((hi - lo) / steady_span, 1) if steady_span > 0 else 0.0,
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 3)
