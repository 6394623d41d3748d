"""A real worker process whose clock jumps by minutes mid-run, on a real 3-node cluster.

The worker's cluster clock reads its local time from ``time.monotonic`` shifted by the
number in the file ``RAFTFLOW_TEST_CLOCK_OFFSET_FILE`` names: a test-only
``sitecustomize`` (``tests/chaos/clock_offset/``, first on that worker's ``PYTHONPATH``)
gives its ``ClusterClock`` that local time; the product has no such hook. The test
writes +300 s into it mid-run, then
-300 s (10 minutes back): a harsher fault than a wall-clock step, which ``time.monotonic``
never sees. Invariants as in the chaos suite: nothing lost, nothing recorded twice,
nothing stuck; the jumping worker keeps recording steps after each jump or, behind, is
fenced and its executions taken over (docs/reliability.md, "Clock faults").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from tests.chaos.clock_offset.sitecustomize import OFFSET_FILE_ENV
from tests.chaos.scenario import Options, Scenario, wait_for

pytestmark = pytest.mark.chaos


def _set_offset(path: Path, seconds: float) -> None:
    """Atomically: the worker reads the file at every clock reading."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(f"{seconds}\n")
    os.replace(temporary, path)


def test_a_worker_clock_jumps_minutes_forward_then_back(
    scenario: Callable[..., Scenario],
    chaos_cluster: LocalCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offset = tmp_path / "clock-offset"
    _set_offset(offset, 0.0)
    options = Options(visibility=2.0, executions=120, produce_over=16.0, workers=1)
    # The jumping worker is the scenario's first, running before any work arrives: one
    # spawned later, on a loaded machine, found most of the work done (CI, once).
    python_path = os.environ.get("PYTHONPATH")
    hook = str(Path(__file__).parent / "clock_offset")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [hook, python_path])))
    monkeypatch.setenv(OFFSET_FILE_ENV, str(offset))
    with scenario("worker clock jumps", chaos_cluster, options) as s:
        monkeypatch.delenv(OFFSET_FILE_ENV)
        if python_path is None:
            monkeypatch.delenv("PYTHONPATH")
        else:
            monkeypatch.setenv("PYTHONPATH", python_path)
        (jumper,) = s.workers
        assert f"test clock: local time shifted by the seconds in {offset}" in jumper.output()
        s.spawn()  # and one whose clock stays right

        def recorded() -> int:
            rows = s.db.query(
                "SELECT COUNT(*) AS n FROM steps WHERE worker_id = ?", jumper.worker_id
            )
            return int(rows[0]["n"])

        wait_for(lambda: recorded() >= 20, 60, "the jumping worker to record steps")
        before = recorded()
        _set_offset(offset, 300.0)  # 5 minutes forward
        s.wait_steps(min(s.snapshot().total_steps + 120, options.executions * options.steps))
        after_forward = recorded()
        _set_offset(offset, -300.0)  # then 10 minutes back
        figures = s.finish(timeout=180)
        after_back = recorded()
        s.extra.update(jumper_steps=[before, after_forward, after_back])
    print(
        f"\nclock jumps: the jumping worker recorded {before} steps before the jumps, "
        f"{after_forward - before} after +300 s, {after_back - after_forward} after -300 s; "
        f"{figures['executions']} executions, {figures['steps']} steps, "
        f"{figures['step_reruns']} re-runs"
    )
    assert after_forward > before, "the worker whose clock jumped forward stopped working"
    assert figures["executions"] == options.executions
