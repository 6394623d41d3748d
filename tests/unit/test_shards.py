"""A sharded deployment on SQLite files: each execution wholly on its partition's cluster.

Routing is a pure function of the id (``engine/shards/partitions.py``); the catalog is
written once by the first process and checked by every later one; everything an
execution has -- its row, its records, its queue group, its children -- is on one
cluster, read here straight from each file.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.runtime.run import MAX_SHARDED_POLL, idle_poll_cap
from raftflow.engine.shards.deployment import DEFAULT_PARTITIONS, open_shards
from raftflow.engine.shards.partitions import partition_of, routing_key

from raftflow import (
    Client,
    ConfigurationError,
    Engine,
    InvalidArgumentError,
    RateLimit,
    Status,
    WorkflowCancelledError,
)


def urls(tmp_path: Path, n: int = 2) -> str:
    return ";".join(f"sqlite:///{tmp_path / f'shard{i}.db'}" for i in range(n))


def rows(path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as db:
        return db.execute(sql, args).fetchall()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(urls(tmp_path))
    yield engine
    engine.close()


def test_the_routing_key_is_the_id_up_to_its_first_slash_or_at() -> None:
    assert routing_key("order-1") == "order-1"
    assert routing_key("order-1/3") == "order-1"  # a child's default id
    assert routing_key("order-1/run2/3/1") == "order-1"  # a grandchild of a later run
    assert routing_key("nightly@2026-12-05T00:00:00+00:00") == "nightly"  # a schedule's fire
    assert routing_key("raftflow:schedule:nightly") == "nightly"  # the schedule itself


def test_a_partition_is_the_same_in_every_process_and_release() -> None:
    # A fixed hash (blake2b), never Python's salted hash(): these values are part of the
    # data format -- changing them would strand every sharded deployment's executions.
    assert partition_of("order-1", 256) == 61
    assert partition_of("order-1/7", 256) == 61
    assert partition_of("tenant-7/a", 1024) == partition_of("tenant-7@b", 1024) == 278
    spread = {partition_of(f"order-{i}", 16) for i in range(400)}
    assert spread == set(range(16))


def test_the_first_process_writes_the_catalog_and_the_next_reads_it(tmp_path: Path) -> None:
    first = open_shards(urls(tmp_path, 3), 1 << 20, None, {}, partitions=32)
    try:
        assert [s.name for s in first] == ["shard-1", "shard-2", "shard-3"]
        catalog = first.catalog
        assert catalog is not None and catalog.partitions == 32 and catalog.epoch == 1
        assert [len(catalog.partitions_of(s.name)) for s in first] == [11, 11, 10]
    finally:
        first.close()
    again = open_shards(urls(tmp_path, 3), 1 << 20, None, {})  # default partitions: ignored
    try:
        assert again.catalog == catalog
    finally:
        again.close()
    assert DEFAULT_PARTITIONS != 32
    files = [f"sqlite:///{tmp_path / f'shard{i}.db'}" for i in (1, 0, 2)]
    with pytest.raises(ConfigurationError, match="the catalog's first"):
        open_shards(";".join(files), 1 << 20, None, {})
    with pytest.raises(ConfigurationError, match="does not list"):
        open_shards(urls(tmp_path, 2), 1 << 20, None, {})


def test_a_url_that_mixes_two_deployments_is_refused(tmp_path: Path) -> None:
    """Every deployment names its clusters ``shard-1``, ``shard-2``...: told apart by their
    names only, the first cluster of one and the second of another were taken for one
    deployment (routing partitions to a cluster that was not theirs). Each deployment now
    has an id, drawn when it is created, in every cluster's identity."""
    one = [f"sqlite:///{tmp_path / f'one{i}.db'}" for i in range(2)]
    two = [f"sqlite:///{tmp_path / f'two{i}.db'}" for i in range(2)]
    for url in (one, two):
        open_shards(";".join(url), 1 << 20, None, {}).close()
    with pytest.raises(ConfigurationError, match="of another deployment"):
        open_shards(f"{one[0]};{two[1]}", 1 << 20, None, {})
    again = open_shards(";".join(one), 1 << 20, None, {})  # its own clusters: as before
    again.close()


def test_a_new_deployment_refuses_a_cluster_that_holds_executions(tmp_path: Path) -> None:
    with Engine.from_url(f"sqlite:///{tmp_path / 'shard1.db'}") as plain:

        @plain.workflow
        def noop() -> None:
            return None

        plain.start(noop)
    with pytest.raises(ConfigurationError, match="holds executions"):
        Engine.from_url(urls(tmp_path))


def test_every_execution_and_all_it_has_live_on_its_own_cluster(
    engine: Engine, tmp_path: Path
) -> None:
    @engine.step
    def double(n: int) -> int:
        return n * 2

    @engine.workflow
    def child(n: int) -> int:
        return double(n)

    @engine.workflow
    def parent(n: int) -> int:
        engine.sleep(0.01)
        return engine.start(child, n).result() + double(n)

    with engine.running_worker(concurrency=8):
        handles = [engine.start(parent, i, execution_id=f"order-{i}") for i in range(30)]
        assert [h.result(timeout=30) for h in handles] == [4 * i for i in range(30)]
    files = {shard.name: tmp_path / f"shard{i}.db" for i, shard in enumerate(engine.shards)}
    placed = {
        name: {r[0] for r in rows(path, "SELECT id FROM executions")}
        for name, path in files.items()
    }
    assert all(placed.values())  # both clusters hold some
    assert sum(len(ids) for ids in placed.values()) == 60  # 30 parents, 30 children, once each
    for name, ids in placed.items():
        for execution_id in ids:
            assert engine.shards.of(execution_id).name == name
            if "/" in execution_id:  # a child: on its parent's cluster
                assert execution_id.split("/")[0] in ids
        steps = {r[0] for r in rows(files[name], "SELECT DISTINCT execution_id FROM steps")}
        assert steps <= ids
    listed = engine.list(limit=100)
    assert {r.id for r in listed} == set().union(*placed.values())
    assert [r.created_at for r in listed] == sorted((r.created_at for r in listed), reverse=True)
    assert len(engine.list(limit=7)) == 7


def test_a_send_reaches_an_execution_on_another_cluster(engine: Engine) -> None:
    @engine.workflow
    def waits() -> Any:
        return engine.recv("ping", timeout=30)

    @engine.workflow
    def pings(target: str) -> None:
        engine.send(target, {"from": "pinger"}, topic="ping")

    target, sender = (
        "waiter-1",
        next(
            f"pinger-{i}"
            for i in range(100)
            if engine.shards.of(f"pinger-{i}") is not engine.shards.of("waiter-1")
        ),
    )
    with engine.running_worker():
        waiting = engine.start(waits, execution_id=target)
        engine.start(pings, target, execution_id=sender).result(timeout=30)
        assert waiting.result(timeout=30) == {"from": "pinger"}


def test_a_child_on_another_cluster_wakes_its_parent_through_the_outbox(
    engine: Engine, tmp_path: Path
) -> None:
    @engine.workflow
    def child(n: int) -> int:
        engine.sleep(0.05)
        return n + 1

    @engine.workflow
    def parent(child_id: str) -> int:
        return engine.start(child, 41, execution_id=child_id).result()

    elsewhere = next(
        f"c-{i}" for i in range(100) if engine.shards.of(f"c-{i}") is not engine.shards.of("p")
    )
    with engine.running_worker():
        assert engine.start(parent, elsewhere, execution_id="p").result(timeout=30) == 42
    home, away = engine.shards.of("p"), engine.shards.of(elsewhere)
    files = {shard.name: tmp_path / f"shard{i}.db" for i, shard in enumerate(engine.shards)}
    assert rows(files[away.name], "SELECT parent_id FROM executions WHERE id = ?", elsewhere) == [
        ("p",)
    ]
    assert rows(files[home.name], "SELECT status, output FROM remote_children") == [
        ("succeeded", "42")
    ]
    assert rows(files[away.name], "SELECT * FROM outbox") == []  # delivered, then deleted


def test_a_cancelled_parent_cancels_its_child_on_another_cluster(engine: Engine) -> None:
    @engine.workflow
    def child() -> None:
        engine.sleep(3600)

    @engine.workflow
    def parent(child_id: str) -> None:
        engine.start(child, execution_id=child_id).result()

    elsewhere = next(
        f"k-{i}" for i in range(100) if engine.shards.of(f"k-{i}") is not engine.shards.of("q")
    )
    with engine.running_worker():
        handle = engine.start(parent, elsewhere, execution_id="q")
        deadline = time.monotonic() + 20
        while engine.store_of(elsewhere).get(elsewhere) is None:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        engine.cancel("q")
        with pytest.raises(WorkflowCancelledError):
            handle.result(timeout=30)
        child_handle = engine.get(elsewhere)
        with pytest.raises(WorkflowCancelledError, match="parent"):
            child_handle.result(timeout=30)


def test_a_client_of_the_deployment_routes_and_a_lone_cluster_refuses_starts(
    engine: Engine, tmp_path: Path
) -> None:
    @engine.workflow
    def hello(name: str) -> str:
        return f"hello {name}"

    with engine.running_worker(), Client.from_url(urls(tmp_path)) as client:
        handles = [client.start("hello", f"n{i}", execution_id=f"h-{i}") for i in range(10)]
        assert [h.result(timeout=30) for h in handles] == [f"hello n{i}" for i in range(10)]
        assert {r.id for r in client.list()} == {f"h-{i}" for i in range(10)}
        assert client.get("h-3").status() is Status.SUCCEEDED
    with Client.from_url(f"sqlite:///{tmp_path / 'shard1.db'}") as lone:
        mine = [r.id for r in lone.list()]
        assert mine and all(engine.shards.of(i).name == "shard-2" for i in mine)
        with pytest.raises(ConfigurationError, match="sharded deployment"):
            lone.start("hello", "x")


def test_a_fork_stays_on_its_source_cluster(engine: Engine) -> None:
    @engine.workflow
    def one() -> int:
        return 1

    with engine.running_worker():
        engine.start(one, execution_id="src").result(timeout=30)
        fork = engine.fork("src", 0)
        assert engine.shards.of(fork.id) is engine.shards.of("src")
        assert fork.result(timeout=30) == 1
        away = next(
            f"f-{i}"
            for i in range(100)
            if engine.shards.of(f"f-{i}") is not engine.shards.of("src")
        )
        with pytest.raises(Exception, match="routes to another cluster"):
            engine.fork("src", 0, new_execution_id=away)


def test_a_schedule_fires_on_the_cluster_of_its_workflow_name_only(
    engine: Engine, tmp_path: Path
) -> None:
    @engine.scheduled("* * * * * *")  # every second
    @engine.workflow
    def tick(at: Any) -> None:
        return None

    owner = engine.shards.of("tick@x").name
    with engine.running_worker():
        deadline = __import__("time").monotonic() + 20
        while not any(r.workflow == "tick" for r in engine.list()):
            assert __import__("time").monotonic() < deadline, "the schedule never fired"
            __import__("time").sleep(0.1)
    for i, shard in enumerate(engine.shards):
        path = tmp_path / f"shard{i}.db"
        fired = rows(path, "SELECT id FROM executions WHERE workflow = 'tick'")
        scheduled = rows(
            path, "SELECT group_id FROM messages WHERE group_id LIKE 'raftflow:schedule:%'"
        )
        assert bool(fired) == (shard.name == owner)
        assert bool(scheduled) == (shard.name == owner)


class Running(threading.Thread):
    """Samples how many executions of ``workflow`` run on every cluster at once."""

    def __init__(self, files: list[Path], workflow: str) -> None:
        super().__init__(daemon=True)
        self.files, self.workflow = files, workflow
        self.most = 0
        self.halt = threading.Event()

    def run(self) -> None:
        sql = "SELECT COUNT(*) FROM executions WHERE workflow = ? AND status = 'running'"
        while not self.halt.wait(0.005):
            now = sum(rows(path, sql, self.workflow)[0][0] for path in self.files)
            self.most = max(self.most, now)


def test_a_concurrency_limit_holds_across_the_clusters(engine: Engine, tmp_path: Path) -> None:
    @engine.step
    def work(n: int) -> int:
        time.sleep(0.05)
        return n

    @engine.workflow(concurrency=2)
    def limited(n: int) -> int:
        return work(n) + work(n)

    @engine.workflow(concurrency=1, concurrency_key=lambda job: job["user"])
    def per_user(job: dict[str, Any]) -> int:
        return work(job["n"])

    @engine.workflow
    def parent(n: int) -> int:
        return engine.start(limited, n).result()

    files = [tmp_path / f"shard{i}.db" for i in range(2)]
    watcher = Running(files, "limited")
    watcher.start()
    with engine.running_worker(concurrency=8):
        handles = [engine.start(limited, i) for i in range(8)]
        handles += [engine.start(parent, i, execution_id=f"parent-{i}") for i in range(4)]
        expected = [2 * i for i in range(8)] + [2 * i for i in range(4)]
        assert [h.result(timeout=60) for h in handles] == expected
        watcher.halt.set()
        keyed = [engine.start(per_user, {"user": "ann", "n": i}) for i in range(3)]
        assert [h.result(timeout=60) for h in keyed] == [0, 1, 2]
    watcher.join()
    home = engine.shards.of("limited").name
    placed = {r.id: engine.shards.of(r.id).name for r in engine.list(limit=100)}
    limited_ids = [r.id for r in engine.list(limit=100) if r.workflow == "limited"]
    assert len(limited_ids) == 12 and {placed[i] for i in limited_ids} == {home}
    # The parents' children: on the limit's cluster, their default id prefixed to route there
    # when their parent is elsewhere.
    prefix = {
        i: "" if engine.shards.of(f"parent-{i}").name == home else "limited/" for i in range(4)
    }
    assert {i for i in limited_ids if "/" in i} == {f"{prefix[i]}parent-{i}/0" for i in range(4)}
    assert set(prefix.values()) == {"", "limited/"}  # both cases met
    assert 1 <= watcher.most <= 2  # never more than the limit, summed over both clusters
    runs = [r for r in engine.list(limit=100) if r.workflow == "per_user"]
    assert {engine.shards.of(r.id).name for r in runs} == {engine.shards.of("per_user:ann").name}
    elsewhere = next(f"x-{i}" for i in range(100) if engine.shards.of(f"x-{i}").name != home)
    with pytest.raises(InvalidArgumentError, match="limited by 'limited'"):
        engine.start(limited, 1, execution_id=elsewhere)
    assert engine.start(limited, 1, execution_id="limited/mine").id == "limited/mine"


def test_a_rate_limit_holds_across_the_clusters(engine: Engine, tmp_path: Path) -> None:
    @engine.step(rate_limit=RateLimit(2, per=0.5))
    def call_api(n: int) -> int:
        return n

    @engine.workflow
    def caller(n: int) -> int:
        return call_api(n)

    ids = [f"call-{i}" for i in range(8)]
    assert len({engine.shards.of(i).name for i in ids}) == 2  # callers on both clusters
    with engine.running_worker(concurrency=8):
        handles = [engine.start(caller, i, execution_id=ids[i]) for i in range(8)]
        assert [h.result(timeout=60) for h in handles] == list(range(8))
    files = {s.name: tmp_path / f"shard{i}.db" for i, s in enumerate(engine.shards)}
    owner = engine.shards.of("call_api").name
    times = sorted(r[0] for r in rows(files[owner], "SELECT at FROM rate_slots"))
    assert len(times) == 8  # one bucket, on the key's cluster, for the callers of both
    for other, path in files.items():
        if other != owner:
            assert rows(path, "SELECT * FROM rate_slots") == []
    assert all(later - earlier >= 0.5 - 1e-6 for earlier, later in zip(times, times[2:]))


def test_an_idle_worker_polls_its_clusters_no_more_often_in_all_than_one() -> None:
    """Each cluster's run of a sharded worker backs its idle polls off to the one-cluster
    cap times the clusters (so the worker's idle reads per second are those of one
    cluster), never beyond a second per cluster, never below the one-cluster cap."""
    assert idle_poll_cap(0.1, 1) == 0.1
    assert idle_poll_cap(0.1, 3) == pytest.approx(0.3)
    assert idle_poll_cap(0.1, 64) == MAX_SHARDED_POLL == 1.0
    assert idle_poll_cap(2.0, 3) == 2.0  # a longer cap of the worker's own is kept


def test_a_sharded_worker_runs_once_per_cluster_with_the_spread_cap(engine: Engine) -> None:
    @engine.workflow
    def noop() -> None:
        return None

    with engine.running_worker(max_poll_interval=0.05) as worker:
        runs = worker._runs
        assert [run.shard for run in runs] == [shard.name for shard in engine.shards]
        assert [run.max_poll for run in runs] == [pytest.approx(0.1)] * 2


def test_a_busy_cluster_does_not_starve_another_of_the_workers_slots(engine: Engine) -> None:
    """Each cluster's run has its own ``concurrency`` slots: executions of one cluster that
    hold every slot they can get leave the other cluster's execution free to run."""
    release = threading.Event()

    @engine.step
    def blocks() -> None:
        release.wait(60)

    @engine.workflow
    def busy() -> None:
        blocks()

    @engine.workflow
    def quick(n: int) -> int:
        return n

    first, second = (shard.name for shard in engine.shards)
    on = {
        name: [i for i in (f"job-{n}" for n in range(200)) if engine.shards.of(i).name == name]
        for name in (first, second)
    }
    try:
        with engine.running_worker(concurrency=2):
            busy_handles = [engine.start(busy, execution_id=i) for i in on[first][:6]]
            started = lambda: sum(  # noqa: E731
                engine.get(h.id).status() is Status.RUNNING for h in busy_handles
            )
            deadline = time.monotonic() + 30
            while started() < 2 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert started() == 2  # the first cluster's two slots are held
            assert engine.start(quick, 7, execution_id=on[second][0]).result(timeout=30) == 7
            assert not release.is_set() and started() == 2  # still held, all along
            release.set()
            assert [h.result(timeout=60) for h in busy_handles] == [None] * 6
    finally:
        release.set()
