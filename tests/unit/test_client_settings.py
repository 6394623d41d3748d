"""A start by name applies the workflow's start settings as the app's engine does: the
workers publish them with their beat (``workers.starts``), the client reads them in the
read of the lanes it already makes. On SQLite files, the workers' app in this process
(the client never touches it: it has a name and a URL)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from raftflow.engine.client.routing import RunningWorker, chosen_settings
from raftflow.engine.ops.cli import main
from raftflow.engine.workflow.starts import StartSettings, publication, read_publication

from raftflow import Client, Engine, Status, WorkflowCancelledError
from raftflow.errors import InvalidArgumentError
from tests.support import wait_until


class Job(BaseModel):
    customer: str
    topic: str = "go"


def app(url: str) -> Engine:
    engine = Engine.from_url(url, version="v1")
    engine.limit_queue("batch", concurrency=1)

    @engine.workflow(timeout=0.5)
    def deadline(job: Job) -> Any:
        return engine.recv(job.topic, timeout=60)

    @engine.workflow(concurrency=2)
    def capped(job: Job) -> Any:
        return engine.recv(job.topic, timeout=60)

    @engine.workflow(concurrency=1, concurrency_key=lambda job: job.customer)
    def per_customer(job: Job) -> Any:
        return engine.recv(job.topic, timeout=60)

    @engine.workflow(queue="batch")
    def nightly(job: Job) -> Any:
        return engine.recv(job.topic, timeout=60)

    @engine.workflow
    def plain(job: Job) -> Any:
        return engine.recv(job.topic, timeout=60)

    return engine


@contextmanager
def serving(url: str) -> Iterator[Engine]:
    """The app's worker running, once its beat has published its lanes and settings."""
    engine = app(url)
    with engine.running_worker(concurrency=8):
        wait_until(lambda: bool(_published(url)), timeout=30)
        yield engine
    engine.close()


def _published(url: str) -> list[str]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        rows = db.execute("SELECT starts FROM workers WHERE starts IS NOT NULL").fetchall()
    return [str(row[0]) for row in rows]


def start_rows(path: Path, execution_id: str) -> dict[str, Any]:
    """What a start wrote that its settings decide."""
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        row = db.execute(
            "SELECT lane, limit_key, limit_max, deadline - created_at AS timeout "
            "FROM executions WHERE id = ?",
            (execution_id,),
        ).fetchone()
    return dict(row)


def running(path: Path, workflow: str) -> int:
    with sqlite3.connect(path) as db:
        row = db.execute(
            "SELECT COUNT(*) FROM executions WHERE workflow = ? AND status = 'running'",
            (workflow,),
        ).fetchone()
    return int(row[0])


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "settings.db"
    return path, f"sqlite:///{path}"


def test_a_start_by_name_writes_what_the_engines_own_start_writes(
    db: tuple[Path, str],
) -> None:
    path, url = db
    with serving(url) as engine, Client.from_url(url) as client:
        for name, queue, key in [
            ("deadline", "default", None),
            ("capped", "default", None),
            ("per_customer", "default", "acme"),
            ("nightly", "batch", None),
            ("plain", "default", None),
        ]:
            job = Job(customer="acme")
            own = engine.start(name, job, execution_id=f"engine-{name}")
            by_name = client.start(
                name, job, execution_id=f"client-{name}", queue=queue, concurrency_key=key
            )
            expected = start_rows(path, own.id)
            assert start_rows(path, by_name.id) == pytest.approx(expected), name
        assert start_rows(path, "client-per_customer")["limit_key"] == "per_customer:acme"
        assert start_rows(path, "client-nightly")["limit_key"] == "queue:batch"
        assert start_rows(path, "client-deadline")["timeout"] == pytest.approx(0.5)


def test_the_timeout_cancels_an_execution_started_by_name(db: tuple[Path, str]) -> None:
    _, url = db
    with serving(url) as engine, Client.from_url(url) as client:
        own = engine.start("deadline", Job(customer="a"))
        by_name = client.start("deadline", {"customer": "a"})
        for handle in (own, by_name):
            with pytest.raises(WorkflowCancelledError, match="timeout"):
                handle.result(timeout=30)
            assert handle.status() is Status.CANCELLED


def test_the_concurrency_limit_holds_for_starts_by_name(db: tuple[Path, str]) -> None:
    path, url = db
    with serving(url), Client.from_url(url) as client:
        handles = [
            client.start("capped", {"customer": "a", "topic": f"t{i}"}, execution_id=f"c{i}")
            for i in range(5)
        ]
        wait_until(lambda: running(path, "capped") == 2, timeout=30)
        most = 0
        for i, handle in enumerate(handles):
            # Release the running ones one by one; the others wait for their slot.
            wait_until(lambda h=handle: h.status() is Status.RUNNING, timeout=30)
            deadline = time.monotonic() + 0.3
            while time.monotonic() < deadline:
                most = max(most, running(path, "capped"))
            client.send(handle.id, i, topic=f"t{i}")
            assert handle.result(timeout=30) == i
        assert most == 2


def test_a_keyed_limit_needs_the_key_and_an_unkeyed_one_refuses_it(
    db: tuple[Path, str],
) -> None:
    path, url = db
    with serving(url), Client.from_url(url) as client:
        with pytest.raises(InvalidArgumentError, match="concurrency_key"):
            client.start("per_customer", {"customer": "a"}, execution_id="k1")
        with pytest.raises(InvalidArgumentError, match="no concurrency_key"):
            client.start("capped", {"customer": "a"}, execution_id="k2", concurrency_key="a")
        with pytest.raises(InvalidArgumentError, match="debounce"):
            client.start("capped", {"customer": "a"}, execution_id="k3", debounce=1.0)
        with sqlite3.connect(path) as sql:
            assert sql.execute("SELECT COUNT(*) FROM executions").fetchone()[0] == 0


def test_the_command_gives_the_key_of_a_start_by_name(
    db: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, url = db
    job = '{"customer": "acme"}'
    with serving(url):
        argv = ["start", "per_customer", job, "--id", "cli-1", "--url", url]
        assert main([*argv, "--concurrency-key", "acme"]) == 0
        assert start_rows(path, "cli-1")["limit_key"] == "per_customer:acme"
        assert main(["start", "per_customer", job, "--id", "cli-2", "--url", url]) == 2
        assert "concurrency_key" in capsys.readouterr().err


# -- which worker's settings a start by name takes ----------------------------------------

LANE = "default/checkout@v2"
FIVE = StartSettings(timeout=5.0)
NINE = StartSettings(timeout=9.0)


def worker(started_at: float, version: str, settings: StartSettings | None) -> RunningWorker:
    lanes = ("", f"default/checkout@{version}")
    published = {f"default/checkout@{version}": settings} if settings is not None else {}
    return RunningWorker(lanes, started_at, read_publication(publication(version, published)))


def test_the_settings_are_the_newest_worker_of_the_chosen_version() -> None:
    workers = [worker(1.0, "v2", FIVE), worker(3.0, "v2", NINE), worker(9.0, "v1", None)]
    assert chosen_settings(LANE, workers) == NINE
    # A lane a worker publishes nothing for has the defaults.
    assert chosen_settings(LANE, [worker(1.0, "v2", None)]) == StartSettings()


def test_no_settings_known_means_none_applied() -> None:
    before = RunningWorker(("", LANE), 1.0, None)  # a worker of a release before settings
    assert chosen_settings(LANE, [before]) is None
    assert chosen_settings("", [worker(1.0, "v2", FIVE)]) is None  # the unrouted lane
    # A worker serving the lane by adoption (its own version is another) does not say.
    adopter = RunningWorker(("", LANE, "default/checkout@v3"), 2.0, worker(2.0, "v3", FIVE).starts)
    assert chosen_settings(LANE, [adopter]) is None


def test_a_publication_this_release_cannot_read_is_ignored() -> None:
    assert read_publication("not json") is None
    assert read_publication('{"lanes": {}}') is None  # no version
    bad = '{"version": "v1", "lanes": {"default/x@v1": {"concurrency": 0}}}'
    assert read_publication(bad) is None
    assert publication("v1", {"default/x@v1": StartSettings()}) == '{"version":"v1"}'
