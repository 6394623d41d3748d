"""A race the leader-kill scenario exposed (fixed): the heartbeat could take a worker's own
live lease for a lost one, and the worker then abandoned an execution nobody else held.
The fix applies a commit's new lease on the loop, before ``committing`` is cleared.

Before the fix, after a commit of a *sync* workflow returned on the worker's loop,
``committing`` was cleared at once, but the new lease or the end of the run was applied
later, by the workflow's thread (now ``Activation.commit`` applies it on the loop, and the
thread only checks the outcome in ``Activation.check_applied``). A heartbeat tick in
between extends the old message seq, which the commit deleted: 0 rows. Its guard compares
``commits`` and ``lease.seq`` with values it read inside that same window, so it passes,
and the heartbeat sets ``held = False`` ("lease lost during a step; its result will be
refused"). The next step call then unwinds, and the execution waits for its own lease to
lapse (``visibility``, 30 s by default) before anyone runs it again.

Naturally the window is the thread's wake-up latency: it was hit twice in one run of
``test_leader_kill_9_twice_and_restart`` (the commits delayed by the election leave every
lease due for renewal). Here it is made deterministic: the workflow thread waits 1 s
before applying a commit's outcome, longer than the heartbeat period (visibility / 4).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from raftflow.engine.workflow.activation import Activation
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine

pytestmark = pytest.mark.chaos

engine = Engine()


@engine.step
def long_step(i: int) -> int:
    time.sleep(1.5)  # longer than the lease: the heartbeat renews it meanwhile
    return i


@engine.step
def short_step(i: int) -> int:
    return i


@engine.workflow
def three_steps(i: int) -> int:
    return long_step(i) + short_step(i) + short_step(i)


@pytest.fixture
def connected(chaos_cluster: LocalCluster) -> Iterator[Engine]:
    engine.connect(chaos_cluster.url)
    yield engine
    engine.close()


def test_heartbeat_never_drops_a_live_lease_of_a_sync_workflow(
    connected: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    applied = Activation.check_applied

    def slow_to_wake(self: Activation, outcome: Any) -> None:
        time.sleep(1.0)  # the workflow thread resumes late after its commit returned
        applied(self, outcome)

    monkeypatch.setattr(Activation, "check_applied", slow_to_wake)
    caplog.set_level(logging.WARNING, logger="raftflow.worker")
    with connected.running_worker(concurrency=1, visibility=1.0) as worker:
        handle = connected.start(three_steps, 1)
        assert handle.result(timeout=30) == 3
    lost = [r.getMessage() for r in caplog.records if "lease lost" in r.getMessage()]
    # One worker, one execution: nobody else can have taken the lease.
    assert lost == [], lost
    # Taken once: claimed, or handed over in memory by start() (the same process).
    taken = worker.stats.claimed + worker.stats.adopted
    assert taken == 1, f"leased {taken} times: it was abandoned"
