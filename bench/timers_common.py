"""What the timers phase's parts share (:mod:`bench.timers`): marks of the workers'
counters, polls of the cluster that cost no Raft entry, the entries counted between marks."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from bench.children import Child, mark_all
from bench.counting import window
from bench.phases import Context

BEAT_KINDS = ("ops.",)  # presence beats: a worker's, whatever it runs

#: Makes a part's figures from the workers' final results (their counters at each mark).
Figures = Callable[[list[dict[str, Any]]], dict[str, Any]]


def wait_weak(ctx: Context, sql: str, *params: Any, timeout: float = 30.0) -> None:
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


def mark(children: list[Child], marks: list[int]) -> int:
    """Snapshot every worker's counters (``bench.worker``'s SIGUSR1); the mark's number."""
    marks[0] += 1
    mark_all(children, marks[0])
    return marks[0]


def worker_entries(results: list[dict[str, Any]], a: int, b: int) -> dict[str, int]:
    """The workers' Raft entries between their marks ``a`` and ``b``, by kind."""
    total: Counter[str] = Counter()
    for result in results:
        raft = window(result["marks"][a - 1]["tally"], result["marks"][b - 1]["tally"], "raft")
        total.update({k: int(v) for k, v in raft.items()})
    return dict(total)
