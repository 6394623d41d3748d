"""Moving partitions to a new cluster (engine/shards/move.py): executions in flight --
sleeping, waiting for a signal -- and finished ones, a cron schedule and rate-limit
reservations move with their partitions; the workers, started again on the URL that lists
the new cluster, finish what was in flight; nothing is left where it was; a move run
again does nothing; a move refuses executions a worker holds; a process still on the
catalog before the move cannot start executions where their partition was."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.shards.move import move_partitions

from raftflow import ConfigurationError, Engine, RateLimit, Status
from raftflow.errors import StaleCatalogError
from tests.support import wait_until

FILES = ("a.db", "b.db", "c.db")


def url(tmp_path: Path, n: int) -> str:
    return ";".join(f"sqlite:///{tmp_path / name}" for name in FILES[:n])


def ids_in(path: Path, sql: str) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute(sql)}


def define(engine: Engine) -> dict[str, Any]:
    @engine.step(rate_limit=RateLimit(100, per=1.0))
    def double(n: int) -> int:
        return 2 * n

    @engine.workflow
    def finished(n: int) -> int:
        engine.write_stream("progress", n)
        engine.set_event("state", {"n": n})
        return double(n)

    @engine.workflow
    def sleeper(n: int) -> int:
        engine.sleep(1.0)
        return double(n)

    @engine.workflow
    def waiter(n: int) -> Any:
        return {"n": n, "got": engine.recv("go", timeout=3600)}

    @engine.scheduled("0 3 * * *")
    @engine.workflow
    def nightly(at: Any) -> None:
        return None

    return {"finished": finished, "sleeper": sleeper, "waiter": waiter}


def test_partitions_move_to_a_new_cluster_with_what_is_in_flight(tmp_path: Path) -> None:
    before = Engine.from_url(url(tmp_path, 2))
    flows = define(before)
    kinds = ("finished", "sleeper", "waiter")
    ids = {kind: [f"{kind}-{i}" for i in range(6)] for kind in kinds}
    with before.running_worker(concurrency=8):
        for kind in kinds:
            for i, execution_id in enumerate(ids[kind]):
                before.start(flows[kind], i, execution_id=execution_id)
        for execution_id in ids["finished"]:
            before.get(execution_id).result(timeout=30)
        wait_until(
            lambda: all(
                before.get(i).status() is Status.RUNNING for i in ids["sleeper"] + ids["waiter"]
            )
        )
    first = before.shards.shards[0].name
    leaving = set(before.shards.catalog.partitions_of(first))  # type: ignore[union-attr]
    before.close()

    after = Engine.from_url(url(tmp_path, 3))
    flows = define(after)
    try:
        new = after.shards.shards[2].name
        assert new == "shard-3" and after.shards.catalog.epoch == 1  # type: ignore[union-attr]
        moving = {i for group in ids.values() for i in group if after.shards.of(i).name == first}
        assert moving and moving != {i for group in ids.values() for i in group}
        report = move_partitions(after.shards, leaving, new)
        assert report.epoch == 2 and report.groups[first] >= len(moving)
        assert report.rows > 0
        after.close()

        after = Engine.from_url(url(tmp_path, 3))  # as every process: it reads the catalog
        flows = define(after)
        assert after.shards.catalog.epoch == 2  # type: ignore[union-attr]
        for execution_id in moving:
            assert after.shards.of(execution_id).name == new
        old, moved_to = tmp_path / FILES[0], tmp_path / FILES[2]
        for table, column in (("executions", "id"), ("steps", "execution_id"),
                              ("messages", "group_id"), ("streams", "execution_id"),
                              ("events", "execution_id")):  # fmt: skip
            assert not ids_in(old, f"SELECT {column} FROM {table}") & moving, table
        assert moving <= ids_in(moved_to, "SELECT id FROM executions")
        for execution_id in set(ids["finished"]) & moving:  # history moved whole
            n = int(execution_id.split("-")[1])
            assert after.get(execution_id).result(timeout=5) == 2 * n
            assert list(after.read_stream(execution_id, "progress")) == [n]
            assert after.get_event(execution_id, "state") == {"n": n}
        if after.shards.of("nightly@x").name == new:  # the schedule went with its partition
            assert ids_in(moved_to, "SELECT group_id FROM messages") >= {
                "raftflow:schedule:nightly"
            }

        with after.running_worker(concurrency=8):
            for i, execution_id in enumerate(ids["waiter"]):
                after.send(execution_id, f"go-{i}", topic="go")
            for i, execution_id in enumerate(ids["sleeper"]):
                assert after.get(execution_id).result(timeout=30) == 2 * i
            for i, execution_id in enumerate(ids["waiter"]):
                assert after.get(execution_id).result(timeout=30) == {"n": i, "got": f"go-{i}"}

        again = move_partitions(after.shards, leaving, new)  # run again: nothing to do
        assert again.groups == {} and again.epoch == 2
    finally:
        after.close()


def test_a_move_refuses_executions_a_worker_holds(tmp_path: Path) -> None:
    engine = Engine.from_url(url(tmp_path, 3))
    release = threading.Event()

    @engine.step
    def blocks() -> None:
        release.wait(30)

    @engine.workflow
    def holds() -> None:
        blocks()

    try:
        with engine.running_worker():
            handle = engine.start(holds, execution_id="held")
            wait_until(lambda: engine.get("held").status() is Status.RUNNING)
            home = engine.shards.of("held").name
            target = next(s.name for s in engine.shards if s.name != home)
            partition = engine.shards.catalog.partitions_of(home)[0]  # type: ignore[union-attr]
            partitions = engine.shards.catalog.partitions_of(home)  # type: ignore[union-attr]
            with pytest.raises(ConfigurationError, match="stop the deployment's workers"):
                move_partitions(engine.shards, partitions, target)
            assert engine.shards.of("held").name == home and partition in partitions
            release.set()
            handle.result(timeout=30)
    finally:
        release.set()
        engine.close()


def test_a_process_on_the_catalog_before_a_move_cannot_start_where_the_partition_was(
    tmp_path: Path,
) -> None:
    """Without the partition fence (migration 17) the stale process's starts succeeded on
    the cluster the partition left: out of reach of every process on the new catalog."""
    stale = Engine.from_url(url(tmp_path, 3))  # reads the catalog now, before the move
    flows = define(stale)
    mover = Engine.from_url(url(tmp_path, 3))
    try:
        first, new = stale.shards.shards[0].name, stale.shards.shards[2].name
        leaving = mover.shards.catalog.partitions_of(first)  # type: ignore[union-attr]
        move_partitions(mover.shards, leaving, new)
        moved = [i for i in (f"late-{n}" for n in range(40)) if stale.shards.of(i).name == first]
        assert moved
        with pytest.raises(StaleCatalogError, match="restart it"):
            stale.start(flows["finished"], 1, execution_id=moved[0])
        with pytest.raises(StaleCatalogError):  # the start with a read (debounced): fenced too
            stale.start(flows["finished"], 2, execution_id=moved[1], debounce=0.5)
        old = tmp_path / FILES[0]
        assert not ids_in(old, "SELECT id FROM executions") & set(moved[:2])
        assert not ids_in(old, "SELECT group_id FROM messages") & set(moved[:2])

        fresh = Engine.from_url(url(tmp_path, 3))  # on the new catalog: starts it there
        try:
            flows = define(fresh)
            fresh.start(flows["finished"], 1, execution_id=moved[0])
            assert moved[0] in ids_in(tmp_path / FILES[2], "SELECT id FROM executions")
            other = next(
                i for i in (f"stays-{n}" for n in range(40)) if fresh.shards.of(i).name != new
            )
            stale.start(flows["finished"], 3, execution_id=other)  # other partitions: as before
        finally:
            fresh.close()
    finally:
        mover.close()
        stale.close()
