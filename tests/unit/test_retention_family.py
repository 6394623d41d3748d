"""Retention and children (stores/retention.sql): a finished child is
kept while its parent still runs -- the parent may yet read its result -- and goes with
the family once the parent has finished and expired. On virtual time: the retention's own
statements run at the instant the test chooses."""

from __future__ import annotations

from datetime import timedelta

from raftflow.engine.runtime.retention import RetentionFlows
from raftflow.engine.testing import WorkflowTestEnvironment

from raftflow import Engine, Status

DAY = 86_400.0


def test_a_finished_child_is_kept_while_its_parent_runs_then_goes_with_it() -> None:
    engine = Engine(retention=timedelta(days=30))

    @engine.step
    def double(x: int) -> int:
        return 2 * x

    @engine.workflow
    def child(x: int) -> int:
        return int(double(x))

    @engine.workflow
    def parent(x: int) -> int:
        kid = engine.start(child, x)
        engine.sleep(40 * DAY)  # the child finishes at once; its result is read on day 40
        return int(kid.result()) + 1

    assert engine.retention is not None
    keep = engine.retention.total_seconds()
    with WorkflowTestEnvironment(engine) as env:
        retention = RetentionFlows(env.clock)
        orphan = engine.start(child, 1)  # no parent: expires like any execution
        handle = engine.start(parent, 5)
        env.advance(35 * DAY)
        kid = f"{handle.id}/0"
        assert engine.store.get(kid).status is Status.SUCCEEDED  # type: ignore[union-attr]
        assert handle.status() is Status.RUNNING  # asleep until day 40
        # Day 35: the orphan and the child ended 35 days ago; only the orphan may go.
        assert engine.store.run(retention.delete_batch(keep, 50)) == 1
        assert engine.store.get(orphan.id) is None
        assert engine.store.get(kid) is not None  # before: deleted, and the parent hung
        assert env.result(handle, within=10 * DAY) == 11
        env.advance(31 * DAY)  # the parent ended 31 days ago: the family goes together
        assert engine.store.run(retention.delete_batch(keep, 50)) == 2
        assert engine.store.get(handle.id) is None and engine.store.get(kid) is None
