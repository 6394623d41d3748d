"""``engine.replay`` and ``raftflow replay``: histories that ``tests.apps.replayed:v1``
recorded, replayed through the app's other versions. A replay reports the first call
where the code parts from the history (exit 1), runs no step body and writes nothing.

On a SQLite file here; ``tests/integration/test_replay_cluster.py`` runs the same bodies
on the shared 3-node rqlite cluster (its ``url`` fixture replaces this one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.ops.cli import main
from raftflow.engine.workflow.divergence import Call

from raftflow import Engine, ExecutionNotFoundError, ReplayReport, Status, WorkflowHandle
from tests.apps import replayed
from tests.apps.replayed import Order
from tests.support import rows, wait_until

APP = "tests.apps.replayed"
VERSIONS = ("v1", "reworded", "renamed", "inserted", "truncated", "extended")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'replay.db'}"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """The file every step body of the app appends to."""
    return tmp_path / "steps.log"


@pytest.fixture
def app(url: str) -> Iterator[dict[str, Engine]]:
    """Every version of the app, on this test's database."""
    engines = {name: getattr(replayed, name) for name in VERSIONS}
    for engine in engines.values():
        engine.connect(url)
    yield engines
    for engine in engines.values():
        engine.close()


def record(v1: Engine, log: Path, *orders: tuple[str, float]) -> list[WorkflowHandle[Any]]:
    """Run ``(id, nap)`` orders on v1 until each has finished, or sleeps (nap > 0)."""
    handles = [
        v1.start("order", Order(id=id_, log=str(log), nap=nap), execution_id=id_)
        for id_, nap in orders
    ]
    with v1.running_worker():
        for handle, (_, nap) in zip(handles, orders):
            if nap:
                wait_until(lambda h=handle: len(h.steps()) == 3, timeout=30)
            else:
                assert handle.result(timeout=30) == ["reserve", "charge", "ship"]
    return handles


def snapshot(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    """Every row of every table of the database (the queue's messages and leases too)."""
    database = engine.store.database
    tables = rows(database, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return {t["name"]: rows(database, f'SELECT * FROM "{t["name"]}"') for t in tables}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["replay", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_unchanged_code_replays_consistently_and_writes_nothing(
    app: dict[str, Engine], log: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (handle,) = record(app["v1"], log, ("order-1", 0.0))
    before, ran = snapshot(app["v1"]), log.read_text()
    for version in ("v1", "reworded"):  # a step's body may change: its result is recorded
        report = app[version].replay(handle.id)
        assert report == ReplayReport("order-1", "order", Status.SUCCEEDED, 3, None)
        assert report.consistent
    code, out = cli(capsys, handle.id, "--app", f"{APP}:v1", "--url", url)
    assert (code, out) == (0, "order-1 (order, succeeded): consistent, 3 calls checked\n")
    assert log.read_text() == ran  # no step body ran
    assert snapshot(app["v1"]) == before


@pytest.mark.parametrize(
    ("version", "index", "recorded", "called"),
    [
        ("renamed", 1, Call("step", "charge"), Call("step", "charge_card")),
        ("inserted", 1, Call("step", "charge"), Call("step", "audit")),
        ("truncated", 2, Call("step", "ship"), None),  # the code ends: ship is recorded
        ("extended", 3, None, Call("step", "notify")),  # the history ended: it succeeded
    ],
)
def test_changed_code_reports_the_first_divergent_call(
    app: dict[str, Engine],
    log: Path,
    url: str,
    capsys: pytest.CaptureFixture[str],
    version: str,
    index: int,
    recorded: Call | None,
    called: Call | None,
) -> None:
    (handle,) = record(app["v1"], log, ("order-2", 0.0))
    before, ran = snapshot(app["v1"]), log.read_text()
    report = app[version].replay(handle.id)
    assert not report.consistent and report.divergence is not None
    assert (report.calls_checked, report.divergence.index) == (index, index)
    assert (report.divergence.recorded, report.divergence.called) == (recorded, called)
    code, out = cli(capsys, handle.id, "--app", f"{APP}:{version}", "--url", url)
    assert code == 1
    assert out.startswith("order-2 (order, succeeded): DIVERGES: ")
    assert f"call {index}" in out
    for call in (recorded, called):
        assert call is None or str(call) in out  # e.g. "step 'charge'"
    assert log.read_text() == ran
    assert snapshot(app["v1"]) == before


def test_an_execution_asleep_replays_up_to_its_sleep(
    app: dict[str, Engine], log: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (handle,) = record(app["v1"], log, ("order-3", 3600.0))
    assert [s.kind for s in handle.steps()] == ["step", "step", "sleep"]
    before, ran = snapshot(app["v1"]), log.read_text()
    assert [m["group_id"] for m in before["messages"]] == ["order-3"]  # parked, for an hour
    # Not there yet: what the code does after the sleep is no divergence (not recorded).
    for version in ("v1", "reworded", "truncated", "extended"):
        report = app[version].replay(handle.id)
        assert report == ReplayReport("order-3", "order", Status.RUNNING, 3, None), version
    assert app["renamed"].replay(handle.id).calls_checked == 1
    code, out = cli(capsys, handle.id, "--app", f"{APP}:extended", "--url", url)
    assert (code, out) == (0, "order-3 (order, running): consistent so far, 3 calls checked\n")
    assert log.read_text() == ran
    assert snapshot(app["v1"]) == before  # the parked message, its lease, all as they were


def test_recent_replays_the_last_executions_of_a_workflow(
    app: dict[str, Engine], log: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    record(app["v1"], log, ("order-4", 0.0), ("order-5", 0.0), ("order-6", 3600.0))
    options = ("--workflow", "order", "--url", url)
    code, out = cli(capsys, "--recent", "10", "--app", f"{APP}:reworded", *options)
    lines = out.splitlines()
    assert code == 0
    assert sorted(lines[:-1]) == [
        "order-4 (order, succeeded): consistent, 3 calls checked",
        "order-5 (order, succeeded): consistent, 3 calls checked",
        "order-6 (order, running): consistent so far, 3 calls checked",
    ]
    assert lines[-1] == "3 executions replayed: 0 diverged"
    # truncated: the finished ones diverge (they shipped), the sleeping one not yet
    code, out = cli(capsys, "--recent", "10", "--app", f"{APP}:truncated", *options)
    assert code == 1
    assert out.splitlines()[-1] == "3 executions replayed: 2 diverged"
    code, out = cli(capsys, "--recent", "2", "--app", f"{APP}:v1", *options, "--json")
    assert code == 0
    assert '"diverged": 0' in out and out.count('"consistent": true') == 2


@pytest.mark.parametrize(
    "args",
    [
        ("missing", "--app", f"{APP}:v1"),  # no such execution
        ("order-7", "--app", f"{APP}:nothing"),  # no such app
        ("--app", f"{APP}:v1"),  # neither ID nor --recent
        ("order-7", "--recent", "3", "--workflow", "order", "--app", f"{APP}:v1"),  # both
        ("--recent", "3", "--app", f"{APP}:v1"),  # no --workflow
        ("--recent", "3", "--workflow", "refund", "--app", f"{APP}:v1"),  # not the app's
    ],
)
def test_usage_errors_exit_2(
    app: dict[str, Engine],
    log: Path,
    url: str,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
) -> None:
    record(app["v1"], log, ("order-7", 0.0))
    code, out = cli(capsys, *args, "--url", url)
    assert code == 2, out
    with pytest.raises(ExecutionNotFoundError):
        app["v1"].replay("missing")
