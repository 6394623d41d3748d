"""Application versions (engine/workflow/versions.py) and what a worker serves of them:
pinning, adoption of the versions no live worker serves, promote, resume/fork to the
current version -- on real SQLite files, with in-process workers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.ops.cli.exits import Exit
from raftflow.engine.ops.cli.main import main
from raftflow.engine.workflow.queues import lane, lane_parts, served_lanes
from raftflow.engine.workflow.versions import check_version
from raftflow.stores.inspect import Inspector

from raftflow import Engine, Status
from raftflow.errors import InvalidArgumentError, ResultTimeoutError
from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]


def app(url: str, version: str | None = None, *, extra: bool = False) -> tuple[Engine, Any]:
    engine = Engine.from_url(url, version=version)

    @engine.step
    def double(n: int) -> int:
        return 2 * n

    if extra:

        @engine.step
        def add_one(n: int) -> int:
            return n + 1

        @engine.workflow
        def calc(n: int) -> int:
            engine.sleep(0.2)
            return add_one(double(n))

    else:

        @engine.workflow
        def calc(n: int) -> int:
            engine.sleep(0.2)
            return double(n)

    return engine, calc


@pytest.fixture
def apps(tmp_path: Path) -> Iterator[tuple[tuple[Engine, Any], tuple[Engine, Any]]]:
    """Versions 1 and 2 of one app on one SQLite file: (engine, workflow) each."""
    url = f"sqlite:///{tmp_path / 'v.db'}"
    one, two = app(url, "1"), app(url, "2")
    yield one, two
    one[0].close()
    two[0].close()


Apps = tuple[tuple[Engine, Any], tuple[Engine, Any]]


def test_the_default_version_is_the_same_in_every_process_and_follows_the_workflows() -> None:
    code = (
        "from tests.apps import upgrade_v1 as a, upgrade_v2 as b; "
        "print(a.engine.version, b.engine.version)"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[0] == runs[1]  # the same source, the same version (no address, no salt)
    assert runs[0][0] != runs[0][1]  # another workflow body, another version
    assert all(len(v) == 12 for v in runs[0])


def test_versions_and_lanes_are_checked_and_read_back() -> None:
    assert check_version("2026.12.1") == "2026.12.1"
    for bad in ("", "a@b", "a/b", " v1", "x" * 65, 3):
        with pytest.raises(InvalidArgumentError):
            check_version(bad)
    with pytest.raises(InvalidArgumentError):
        Engine(version="a/b")
    assert lane_parts(lane("billing", "wf@odd", "v2")) == ("billing", "wf@odd", "v2")
    assert lane_parts(lane("billing", "wf")) == ("billing", "wf", None)
    assert lane_parts("") is None
    served = served_lanes([("default", "a"), ("billing", "b")], ["billing"], ["v1"], ["b"])
    assert served == ("", "billing/b", "billing/b@v1")


def test_an_execution_runs_only_on_its_own_version_unless_a_worker_adopts_it(apps: Apps) -> None:
    (v1, calc1), (v2, calc2) = apps
    old = v1.start(calc1, 5)
    with v2.running_worker():
        new = v2.start(calc2, 5)
        assert new.result(timeout=10) == 10
        with pytest.raises(ResultTimeoutError):  # version 1's: not this worker's
            old.result(timeout=1)
    assert old.status() is Status.PENDING
    with v2.running_worker(adopt_older=True):  # no live worker serves version 1
        assert old.result(timeout=10) == 10


def test_a_worker_adopts_a_version_only_once_no_live_worker_serves_it(apps: Apps) -> None:
    (v1, calc1), (v2, _) = apps
    old = v1.start(calc1, 4)  # priority 0: below the live version-1 worker's floor
    with v1.running_worker(min_priority=4) as live:
        inspector = Inspector(v2.store.database)
        wait_until(lambda: live.worker_id in {w.worker_id for w in inspector.workers()})
        with v2.running_worker(adopt_older=True), pytest.raises(ResultTimeoutError):
            old.result(timeout=1.5)  # version 1 has a live worker: not adopted
        assert old.status() is Status.PENDING
    # That worker stopped (its last beat says so): the next one adopts at once.
    with v2.running_worker(adopt_older=True):
        assert old.result(timeout=10) == 8


def test_raftflow_versions_lists_them_and_promote_moves_the_old_ones_on(
    apps: Apps, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (v1, calc1), (v2, _) = apps
    url = f"sqlite:///{tmp_path / 'v.db'}"  # the fixture's
    handles = [v1.start(calc1, n) for n in range(3)]
    assert main(["versions", "--url", url, "--json"]) == 0
    listed = {row["version"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed["1"]["in_flight"] == 3 and listed["1"]["workflows"] == ["calc"]
    assert listed["1"]["workers"] == 0
    assert main(["versions", "promote", "1", "--to", "1", "--url", url]) == Exit.USAGE
    assert main(["versions", "promote", "1", "--to", "2", "--url", url]) == 0
    assert "3 executions moved from version 1 to 2" in capsys.readouterr().out
    with v2.running_worker():
        assert [h.result(timeout=10) for h in handles] == [0, 2, 4]


def test_resume_and_fork_keep_the_version_or_move_to_the_current_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    v1 = Engine.from_url(url, version="1")
    fail = {"on": True}

    @v1.step
    def fragile(n: int) -> int:
        if fail["on"]:
            raise ValueError("not yet")
        return n

    @v1.workflow
    def job(n: int) -> int:
        return fragile(n)

    v2 = Engine.from_url(url, version="2")
    v2.registry = v1.registry.__class__("2")
    v2.registry.workflows, v2.registry.steps = v1.registry.workflows, v1.registry.steps
    try:
        handle = v1.start(job, 7)
        with v1.running_worker(), pytest.raises(Exception, match="not yet"):
            handle.result(timeout=10)
        fail["on"] = False
        forked = v2.fork(handle.id, 0, to_current_version=True)
        assert v2.resume(handle.id)  # kept on version 1
        with v2.running_worker():
            assert forked.result(timeout=10) == 7  # moved: version 2 runs it
            with pytest.raises(ResultTimeoutError):
                handle.result(timeout=1)
        assert v2.resume(handle.id) is False  # pending already: nothing to resume
        with v1.running_worker():
            assert handle.result(timeout=10) == 7
    finally:
        v1.close()
        v2.close()
