"""Cron schedules on real clusters: several worker processes, one of them killed with
SIGKILL and restarted, the Raft leader killed, and every worker stopped for a while --
each fire time run exactly once as the workflow sees it (its step logs each run, outside
the engine), none missed, and the missed ones caught up (or skipped beyond ``catch_up``)."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Collection, Mapping
from datetime import datetime, timezone
from pathlib import Path

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine, Status, current_step
from tests.apps.scheduled import FIRES, fires_seen
from tests.integration.workers import WorkerProcess, rotated_url, workers
from tests.support import wait_until

APP = "tests.apps.scheduled:engine"


def fire_times(engine: Engine, workflow: str) -> list[float]:
    """The fire times of the workflow's executions, from their ids, sorted."""
    records = engine.store.list(limit=10_000)
    ids = [r.id for r in records if r.workflow == workflow]
    return sorted(datetime.fromisoformat(i.split("@", 1)[1]).timestamp() for i in ids)


def assert_each_time_ran_once(
    engine: Engine, workflow: str, seen: Mapping[str, Collection[str]]
) -> list[float]:
    """``seen``: per fire time (ISO), the executions whose code ran with it. Each time ran
    in one execution, its own (``"<workflow>@<time>"``); every execution that succeeded
    ran (one started as the workers stopped may not have yet). Returns the times run."""
    doubled = {at: sorted(ids) for at, ids in seen.items() if len(ids) > 1}
    assert not doubled, f"fire times run by more than one execution: {doubled}"
    strangers = {at: ids for at, ids in seen.items() if set(ids) != {f"{workflow}@{at}"}}
    assert not strangers, f"fire times run by another time's execution: {strangers}"
    records = [r for r in engine.store.list(limit=10_000) if r.workflow == workflow]
    ran = {execution for ids in seen.values() for execution in ids}
    assert ran <= {r.id for r in records}
    assert {r.id for r in records if r.status is Status.SUCCEEDED} <= ran
    return sorted(datetime.fromisoformat(at).timestamp() for at in seen)


def all_succeeded(engine: Engine, workflow: str) -> bool:
    """Every execution of ``workflow`` started so far has succeeded (started is not run)."""
    return all(
        r.status is Status.SUCCEEDED
        for r in engine.store.list(limit=10_000)
        if r.workflow == workflow
    )


def assert_every_second(times: list[float]) -> None:
    gaps = [b - a for a, b in itertools.pairwise(times)]
    missed = [(a, b) for a, b in itertools.pairwise(times) if b - a != 1.0]
    assert not missed, f"fire times missed or doubled: {missed} (gaps {sorted(set(gaps))})"


@pytest.mark.slow
def test_each_fire_time_runs_once_through_worker_kills_a_leader_kill_and_downtime(
    rqlite_cluster_factory: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster: LocalCluster = rqlite_cluster_factory(3)  # type: ignore[operator]
    fires = tmp_path / "fires"
    fires.mkdir()
    monkeypatch.setenv(FIRES, str(fires))  # the workers' step logs each fire it runs
    engine = Engine.from_url(cluster.url)
    try:
        # Leases of 5 s: a worker killed holding the schedule delays it 5 s, then catch-up.
        with workers(APP, cluster.urls, 3, tmp_path / "a", concurrency=4, visibility=5) as procs:
            wait_until(lambda: len(fire_times(engine, "tick")) >= 3, timeout=30)
            procs[0].kill()  # SIGKILL, across fire times
            procs[0].process.wait(10)
            time.sleep(2.5)
            procs[0] = WorkerProcess(
                APP,
                rotated_url(cluster.urls, 0),
                tmp_path / "a" / "worker-0b.log",
                concurrency=4,
                visibility=5,
            )
            time.sleep(2.5)
            leader = cluster.leader()
            cluster.kill(leader)  # the Raft leader, across fire times
            cluster.wait_ready()
            cluster.start_node(leader)
            before = len(fire_times(engine, "tick"))
            wait_until(lambda: len(fire_times(engine, "tick")) >= before + 3, timeout=45)
        # Every worker stopped: fire times pass with no one to fire them.
        stopped = fire_times(engine, "tick")[-1]
        time.sleep(4.0)
        with workers(APP, cluster.urls, 2, tmp_path / "b", concurrency=4, visibility=5):
            wait_until(lambda: fire_times(engine, "tick")[-1] >= stopped + 7, timeout=30)
            wait_until(lambda: all_succeeded(engine, "tick"), timeout=30)
        # As the workflow saw them: each time ran once, in its own execution.
        assert len(assert_each_time_ran_once(engine, "tick", fires_seen(fires))) >= 15
        times = fire_times(engine, "tick")
        assert_every_second(times)  # none missed (the downtime caught up), none twice
        # The schedule waits, parked for its next time, on no worker.
        (info,) = engine.list_schedules()
        assert info.workflow == "tick" and not info.firing and info.next_at > times[-1]
        first = datetime.fromtimestamp(times[0], tz=timezone.utc).isoformat()
        assert engine.get(f"tick@{first}").result(timeout=5) == first
    finally:
        engine.close()


def test_missed_times_beyond_catch_up_are_skipped_and_the_cli_lists_schedules(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = Engine.from_url(cluster.url)
    seen: dict[str, set[str]] = defaultdict(set)  # each fire as the workflow saw it

    @engine.step
    def note_fire(at: str) -> str:
        seen[at].add(current_step().execution_id)
        return at

    @engine.scheduled("* * * * * *", catch_up=2)
    def catching_up(at: datetime) -> str:
        return note_fire(at.isoformat())

    try:
        with engine.running_worker(concurrency=2):
            wait_until(lambda: len(fire_times(engine, "catching_up")) >= 2, timeout=20)
        before = fire_times(engine, "catching_up")
        time.sleep(5.5)  # about five fire times pass with no worker
        with engine.running_worker(concurrency=2):
            wait_until(
                lambda: len(fire_times(engine, "catching_up")) >= len(before) + 4, timeout=20
            )
            # Started is not run: the worker stays until every fire it started has finished.
            wait_until(lambda: all_succeeded(engine, "catching_up"), timeout=30)
        times = fire_times(engine, "catching_up")
        assert len(assert_each_time_ran_once(engine, "catching_up", seen)) >= len(before) + 4
        gaps = [(a, b) for a, b in itertools.pairwise(times) if b - a != 1.0]
        assert len(gaps) == 1, times  # one hole: the missed times beyond catch_up
        hole_end = times.index(gaps[0][1])
        assert gaps[0][1] - gaps[0][0] >= 2.0
        # The recovery's one fire started the latest due time and the 2 before it together.
        records = {
            datetime.fromisoformat(r.id.split("@", 1)[1]).timestamp(): r
            for r in engine.store.list(limit=10_000)
            if r.workflow == "catching_up"
        }
        recovered = [records[t].created_at for t in times[hole_end : hole_end + 3]]
        assert len(set(recovered)) == 1, recovered

        # raftflow schedules: the table, --json with the next times, --remove.
        from raftflow.engine.ops.cli import main

        assert main(["schedules", "--url", cluster.url]) == 0
        out = capsys.readouterr().out
        assert "catching_up" in out and "* * * * * *" in out and "parked" in out
        assert main(["schedules", "--url", cluster.url, "--json", "--next", "4"]) == 0
        import json

        (listed,) = json.loads(capsys.readouterr().out)
        assert listed["workflow"] == "catching_up" and listed["catch_up"] == 2
        nexts = [datetime.fromisoformat(t).timestamp() for t in listed["next"]]
        assert len(nexts) == 4 and all(b - a == 1.0 for a, b in itertools.pairwise(nexts))
        assert listed["last_execution"] == f"catching_up@{records[times[-1]].id.split('@')[1]}"
        assert main(["schedules", "--url", cluster.url, "--remove", "catching_up"]) == 0
        assert engine.list_schedules() == []
        assert main(["schedules", "--url", cluster.url, "--remove", "catching_up"]) == 1
    finally:
        engine.remove_schedule("catching_up")
        engine.close()
