"""CPU and memory of the processes taking part in a phase, read with psutil.

Groups of pids (``rqlite``, ``workers``, ``bench``) are watched from the parent: RSS is
sampled every ``interval`` seconds in a thread, CPU time is read on demand (at the marks
that bound a measurement window) and the difference divided by the window's length is the
number of cores the group kept busy.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psutil  # type: ignore[import-untyped]

MB = 1024 * 1024


class Sampler:
    def __init__(self, groups: dict[str, list[int]], interval: float = 0.5) -> None:
        self.groups = groups
        self.interval = interval
        self._procs = {pid: psutil.Process(pid) for pids in groups.values() for pid in pids}
        self._last_cpu: dict[int, float] = {}
        self.rss: list[tuple[float, dict[int, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        values: dict[int, int] = {}
        for pid, proc in self._procs.items():
            try:
                values[pid] = proc.memory_info().rss
            except psutil.Error:
                continue
        self.rss.append((time.time(), values))

    def cpu(self) -> dict[str, float]:
        """CPU seconds (user + system) so far, per group."""
        out: dict[str, float] = {}
        for group, pids in self.groups.items():
            total = 0.0
            for pid in pids:
                try:
                    times = self._procs[pid].cpu_times()
                    self._last_cpu[pid] = times.user + times.system
                except psutil.Error:
                    pass
                total += self._last_cpu.get(pid, 0.0)
            out[group] = total
        return out

    def rss_summary(
        self, group: str, since: float = 0.0, until: float = float("inf")
    ) -> dict[str, Any]:
        """Per process of ``group``: RSS (MB) at the first and last sample in the window, and
        the peak; plus the sum over the group."""
        per: list[dict[str, float]] = []
        for pid in self.groups.get(group, []):
            series = [v[pid] for t, v in self.rss if since <= t <= until and pid in v]
            if series:
                per.append(
                    {
                        "pid": pid,
                        "start_mb": round(series[0] / MB, 1),
                        "peak_mb": round(max(series) / MB, 1),
                        "end_mb": round(series[-1] / MB, 1),
                    }
                )
        return {
            "processes": per,
            "start_mb": round(sum(p["start_mb"] for p in per), 1),
            "peak_mb": round(sum(p["peak_mb"] for p in per), 1),
            "end_mb": round(sum(p["end_mb"] for p in per), 1),
        }

    def rss_series(self, group: str) -> list[tuple[float, float]]:
        """(time, summed RSS in MB) of a group, every sample."""
        pids = self.groups.get(group, [])
        return [(t, sum(v.get(pid, 0) for pid in pids) / MB) for t, v in self.rss]


def cores(before: dict[str, float], after: dict[str, float], seconds: float) -> dict[str, float]:
    """Average cores used per group between two :meth:`Sampler.cpu` readings."""
    if seconds <= 0:
        return {group: 0.0 for group in after}
    return {group: round((after[group] - before.get(group, 0.0)) / seconds, 2) for group in after}
