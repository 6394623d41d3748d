"""The ``raftflow`` command on a sharded deployment of two SQLite files: listings read every
cluster and merge (newest first, queues summed per lane, a worker of several clusters
once), a command on one execution goes to its cluster, ``migrate`` migrates each cluster
and ``shards`` shows the catalog. (On rqlite: tests/integration/test_shards_operations.py.)"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.ops.cli import main
from raftflow.engine.ops.cli.exits import Exit
from raftflow.engine.workflow.schedule import SCHEDULE_PREFIX
from raftflow.transports.db.schema import LATEST

from raftflow import Engine
from tests.support import wait_until
from tests.unit.test_shards import urls

Capture = pytest.CaptureFixture[str]


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAFTFLOW_URL", "RAFTFLOW_APP", "RAFTFLOW_USERNAME", "RAFTFLOW_PASSWORD_FILE"):
        monkeypatch.delenv(name, raising=False)


def define(engine: Engine) -> Engine:
    """The workflows of these tests: ``calc`` (one step) and ``waits`` (for a message)."""

    @engine.step
    def double(n: int) -> int:
        return 2 * n

    @engine.workflow
    def calc(n: int) -> int:
        return double(n)

    @engine.workflow
    def waits() -> Any:
        return engine.recv("go", timeout=120)

    return engine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = define(Engine(url=urls(tmp_path), version="1"))
    yield engine
    engine.close()


def lone(tmp_path: Path, position: int) -> Engine:
    """The same app on one cluster of the deployment alone (shard-<position>)."""
    return define(Engine(url=f"sqlite:///{tmp_path / f'shard{position - 1}.db'}", version="1"))


def spread(engine: Engine, prefix: str, each: int = 2) -> list[str]:
    """Ids that put ``each`` executions on every cluster."""
    ids: dict[str, list[str]] = {shard.name: [] for shard in engine.shards}
    n = 0
    while any(len(found) < each for found in ids.values()):
        execution_id = f"{prefix}-{n}"
        found = ids[engine.shards.of(execution_id).name]
        if len(found) < each:
            found.append(execution_id)
        n += 1
    return [execution_id for found in ids.values() for execution_id in found]


def on(engine: Engine, cluster: str, prefix: str) -> str:
    return next(i for i in spread(engine, prefix) if engine.shards.of(i).name == cluster)


def cli(capsys: Capture, *args: str, url: str, code: int = Exit.OK) -> str:
    capsys.readouterr()
    assert main([*args, "--url", url]) == code, capsys.readouterr()
    return capsys.readouterr().out


def cli_json(capsys: Capture, *args: str, url: str) -> Any:
    return json.loads(cli(capsys, *args, "--json", url=url))


def test_list_get_and_steps_see_every_cluster(
    engine: Engine, tmp_path: Path, capsys: Capture
) -> None:
    url = urls(tmp_path)
    ids = spread(engine, "calc", each=3)
    with engine.running_worker():
        for execution_id in ids:
            engine.start("calc", 1, execution_id=execution_id).result(timeout=30)
    listed = cli_json(capsys, "list", url=url)
    assert sorted(r["id"] for r in listed) == sorted(ids)
    assert all(r["cluster"] == engine.shards.of(r["id"]).name for r in listed)
    newest = sorted(listed, key=lambda r: (-r["created_at"], r["id"]))[:4]
    assert cli_json(capsys, "list", "--limit", "4", url=url) == newest
    assert (
        len(cli_json(capsys, "list", "--status", "succeeded", "--workflow", "calc", url=url)) == 6
    )
    assert "CLUSTER" in cli(capsys, "list", url=url)
    far = on(engine, "shard-2", "calc")
    detail = cli_json(capsys, "get", far, url=url)
    assert (detail["cluster"], detail["status"], detail["output"]) == ("shard-2", "succeeded", 2)
    assert "cluster       shard-2" in cli(capsys, "get", far, url=url)
    (step,) = cli_json(capsys, "steps", far, url=url)
    assert (step["name"], step["output"]) == ("double", 2)
    assert cli(capsys, "get", "calc-nope", url=url, code=Exit.FAILED) == ""
    assert len(cli_json(capsys, "executions", url=url)) == 6  # the deprecated spelling


def test_commands_on_one_execution_go_to_its_cluster(
    engine: Engine, tmp_path: Path, capsys: Capture
) -> None:
    url = urls(tmp_path)
    near, far = on(engine, "shard-1", "wait"), on(engine, "shard-2", "wait")
    with engine.running_worker():
        for execution_id in (near, far):
            engine.start("waits", execution_id=execution_id)
        wait_until(lambda: cli_json(capsys, "get", far, url=url)["status"] == "running")
        cli(capsys, "send", far, '"go"', "--topic", "go", url=url)
        assert json.loads(cli(capsys, "result", far, "--timeout", "30", url=url)) == "go"
        assert cli_json(capsys, "cancel", near, url=url)["cancelled"] is True
        wait_until(lambda: cli_json(capsys, "get", near, url=url)["status"] == "cancelled")
        assert cli_json(capsys, "resume", near, url=url) == {"id": near, "resumed": True}
        forked = cli_json(capsys, "fork", far, "--from-step", "0", url=url)["id"]
        assert engine.shards.of(forked).name == "shard-2"
        assert cli_json(capsys, "get", forked, url=url)["cluster"] == "shard-2"
        for execution_id in (near, forked):
            engine.send(execution_id, "again", topic="go")
            assert engine.get(execution_id).result(timeout=30) == "again"
        started = on(engine, "shard-2", "started")  # by name, on the live workers' version
        assert cli(capsys, "start", "calc", "21", "--id", started, "--wait", url=url) == "42\n"
        assert engine.store_of(started).get(started) is not None  # on its own cluster


def test_the_queue_sums_every_cluster_and_names_where_a_lane_has_no_worker(
    engine: Engine, tmp_path: Path, capsys: Capture
) -> None:
    url = urls(tmp_path)
    for execution_id in spread(engine, "wait", each=2):
        engine.start("waits", execution_id=execution_id)
    (lane,) = cli_json(capsys, "queue", url=url)["queues"]
    assert (lane["workflow"], lane["groups"], lane["ready"], lane["workers"]) == ("waits", 4, 4, 0)
    per = cli_json(capsys, "queue", "--per-cluster", url=url)
    assert per["ready"] == 4 and sum(p["ready"] for p in per["priorities"]) == 4
    assert [(c["cluster"], c["ready"]) for c in per["clusters"]] == [("shard-1", 2), ("shard-2", 2)]
    text = cli(capsys, "queue", "--per-cluster", url=url)
    assert "== cluster shard-1" in text and "== cluster shard-2" in text
    only_first = lone(tmp_path, 1)  # a worker given the first cluster's URL alone
    try:
        with only_first.running_worker(worker_id="w-first"):

            def served() -> Any:
                (lane,) = cli_json(capsys, "queue", url=url)["queues"]
                parked = lane["leased"] + lane["ready"] == 2  # shard-1's waiting in recv
                return lane if parked and lane["workers"] else None  # and its beat seen

            lane = wait_until(served)
            assert (lane["groups"], lane["workers"], lane["serving"]) == (4, 1, ["w-first"])
            assert lane["unserved_on"] == ["shard-2"]
            assert "1 (none on shard-2: waits there)" in cli(capsys, "queue", url=url)
    finally:
        only_first.close()


def test_a_worker_of_several_clusters_is_listed_once_with_its_clusters(
    engine: Engine, tmp_path: Path, capsys: Capture
) -> None:
    url = urls(tmp_path)
    second = lone(tmp_path, 2)
    try:
        with (
            engine.running_worker(worker_id="w-both", concurrency=3),
            second.running_worker(worker_id="w-second", concurrency=2),
        ):

            def beaten() -> Any:  # each run beats on its own cluster: both runs of w-both
                found = {w["worker_id"]: w for w in cli_json(capsys, "workers", url=url)}
                both = len(found) == 2 and len(found["w-both"]["clusters"]) == 2
                return found if both else None

            listed = wait_until(beaten)
            assert listed["w-both"]["clusters"] == ["shard-1", "shard-2"]
            assert listed["w-both"]["concurrency"] == 6  # 3 slots on each cluster
            assert (listed["w-second"]["clusters"], listed["w-second"]["concurrency"]) == (
                ["shard-2"],
                2,
            )
            assert "shard-1, shard-2" in cli(capsys, "workers", url=url)
            (version,) = cli_json(capsys, "versions", url=url)
            assert (version["version"], version["workers"]) == ("1", 2)  # w-both once
            ids = spread(engine, "wait", each=1)
            for execution_id in ids:
                engine.start("waits", execution_id=execution_id)
            wait_until(lambda: cli_json(capsys, "versions", url=url)[0]["in_flight"] == 2)
    finally:
        second.close()


def test_schedules_of_every_cluster_with_the_cluster_of_each(
    engine: Engine, tmp_path: Path, capsys: Capture
) -> None:
    @engine.scheduled("0 3 * * *")
    @engine.workflow
    def nightly(at: Any) -> None:
        return None

    @engine.scheduled("0 4 * * *")
    @engine.workflow
    def cleanup(at: Any) -> None:
        return None

    url = urls(tmp_path)
    with engine.running_worker():
        found = wait_until(
            lambda: len(listed := cli_json(capsys, "schedules", url=url)) == 2 and listed
        )
    assert [s["workflow"] for s in found] == ["cleanup", "nightly"]
    for schedule in found:
        assert schedule["cluster"] == engine.shards.of(SCHEDULE_PREFIX + schedule["workflow"]).name
    assert "CLUSTER" in cli(capsys, "schedules", url=url)


def test_migrate_migrates_each_cluster(tmp_path: Path, capsys: Capture) -> None:
    url = urls(tmp_path)  # two empty files
    dry = cli_json(capsys, "migrate", "--dry-run", url=url)
    assert [c["pending"] for c in dry["clusters"]] == [list(range(1, LATEST + 1))] * 2
    assert "== cluster 2 of 2" in cli(capsys, "migrate", "--dry-run", url=url)
    done = cli_json(capsys, "migrate", url=url)
    assert [(c["url"], c["version"]) for c in done["clusters"]] == [
        (f"sqlite:///{tmp_path / f'shard{i}.db'}", LATEST) for i in range(2)
    ]
    for i in range(2):
        with sqlite3.connect(tmp_path / f"shard{i}.db") as db:
            assert db.execute("SELECT MAX(version) FROM raftflow_schema").fetchone() == (LATEST,)
    with Engine.from_url(url, auto_migrate=False) as engine:  # a deployment can open on them
        assert [shard.name for shard in engine.shards] == ["shard-1", "shard-2"]


def test_shards_shows_the_catalog_and_what_each_cluster_holds(
    engine: Engine, tmp_path: Path, capsys: Capture
) -> None:
    url = urls(tmp_path)
    ids = spread(engine, "calc", each=2) + spread(engine, "more", each=1)
    with engine.running_worker():
        for execution_id in ids:
            engine.start("calc", 1, execution_id=execution_id).result(timeout=30)
    shown = cli_json(capsys, "shards", url=url)
    catalog = engine.shards.catalog
    assert catalog is not None
    assert (shown["sharded"], shown["partitions"], shown["epoch"]) == (True, catalog.partitions, 1)
    assert shown["catalog"] == "shard-1"
    for i, cluster in enumerate(shown["clusters"]):
        assert cluster["name"] == f"shard-{i + 1}"
        assert cluster["url"] == f"sqlite:///{tmp_path / f'shard{i}.db'}"
        assert cluster["partition_ids"] == catalog.partitions_of(cluster["name"])
        assert cluster["partitions"] == len(cluster["partition_ids"])
        assert cluster["executions"]["succeeded"] == 3
        assert cluster["outbox"] == 0  # nothing waits to be relayed
    text = cli(capsys, "shards", url=url)
    assert "2 clusters, 256 partitions, catalog epoch 1 (on shard-1)" in text
    assert "shard-2" in text and "SUCCEEDED" in text and "OUTBOX" in text
    alone = cli(capsys, "shards", url=f"sqlite:///{tmp_path / 'shard1.db'}")
    assert "this cluster is 'shard-2' of a sharded deployment" in alone
    plain = cli(capsys, "shards", url=f"sqlite:///{tmp_path / 'plain.db'}")
    assert plain.startswith("one cluster, not sharded")
    new = ";".join(f"sqlite:///{tmp_path / f'new{i}.db'}" for i in range(3))
    created = cli_json(capsys, "shards", "--partitions", "48", url=new)
    assert created["partitions"] == 48
    assert [c["partitions"] for c in created["clusters"]] == [16, 16, 16]
