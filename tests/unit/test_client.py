"""raftflow.Client on SQLite files: workflows started by name (no code of theirs here but
the workers'), on the version the running workers serve; refused when the workers report
what they serve and none serves it; left waiting, unrouted, when none reports."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from raftflow.engine.client.async_client import AsyncClient
from raftflow.engine.client.routing import RunningWorker, choose_lane
from raftflow.engine.ops.cli import main
from raftflow.stores.lanes import LaneFlows

from raftflow import Client, Engine, Status, WorkflowFailedError
from raftflow.errors import ExecutionConflictError, UnknownWorkflowError
from tests.support import wait_until


class Order(BaseModel):
    id: str
    amount: float


class Receipt(BaseModel):
    order: str
    charged: float
    version: str


def app(url: str, version: str) -> Engine:
    """The workers' app: ``checkout`` (its receipt names the version that ran it) and
    ``approval`` (waits for a message, publishes an event)."""
    engine = Engine.from_url(url, version=version)

    @engine.workflow
    def checkout(order: Order) -> Receipt:
        return Receipt(order=order.id, charged=order.amount, version=version)

    @engine.workflow
    def approval(order: Order) -> str:
        engine.set_event("asked", {"order": order.id})
        answer = engine.recv("review", timeout=60)
        return f"{order.id}: {answer}"

    return engine


@contextmanager
def serving(url: str, version: str) -> Iterator[Engine]:
    """A worker of ``version`` running, once its beat has written the lanes it serves."""
    engine = app(url, version)
    lane = f"default/checkout@{version}"
    before = _serving(engine, lane)
    with engine.running_worker():
        wait_until(lambda: _serving(engine, lane) > before, timeout=30)
        yield engine
    engine.close()


def _serving(engine: Engine, lane: str) -> int:
    """How many live workers serve ``lane``."""
    _, served = engine.store.run(LaneFlows(engine.store.clock).present(""))
    return served.count(lane)


def lane_of(path: Path, execution_id: str) -> str | None:
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT lane FROM executions WHERE id = ?", (execution_id,)).fetchone()
    return None if row is None else str(row[0])


def counts(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path) as db:
        executions = db.execute("SELECT COUNT(*) FROM executions").fetchone()[0]
        messages = db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    return int(executions), int(messages)


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "client.db"
    return path, f"sqlite:///{path}"


def test_a_start_by_name_runs_on_the_version_the_running_workers_serve(
    db: tuple[Path, str],
) -> None:
    path, url = db
    with serving(url, "v1"), Client.from_url(url) as client:
        handle = client.start(
            "checkout", Order(id="o1", amount=12.5), execution_id="o1", output_type=Receipt
        )
        assert handle.created and lane_of(path, "o1") == "default/checkout@v1"
        assert handle.result(timeout=30) == Receipt(order="o1", charged=12.5, version="v1")
        assert handle.status() is Status.SUCCEEDED
        # Without output_type, the output is its JSON; the id makes a start idempotent.
        assert client.get("o1").result(timeout=5) == {
            "order": "o1",
            "charged": 12.5,
            "version": "v1",
        }
        again = client.start("checkout", {"id": "o1", "amount": 99}, execution_id="o1")
        assert not again.created and again.result(timeout=5)["charged"] == 12.5
        with pytest.raises(ExecutionConflictError):
            client.start("approval", {"id": "o1", "amount": 1}, execution_id="o1")
        assert [r.id for r in client.list(status="succeeded")] == ["o1"]


def test_the_version_most_running_workers_serve_is_chosen(db: tuple[Path, str]) -> None:
    path, url = db
    # The v1 worker started last: a tie would go to it, the majority does not.
    with serving(url, "v2"), serving(url, "v2"), serving(url, "v1"), Client.from_url(url) as c:
        handle = c.start("checkout", {"id": "o2", "amount": 1.0})
        assert lane_of(path, handle.id) == "default/checkout@v2"
        assert handle.result(timeout=30)["version"] == "v2"


def test_with_no_worker_known_the_execution_waits_unrouted_then_a_worker_runs_it(
    db: tuple[Path, str],
) -> None:
    path, url = db
    with Client.from_url(url) as client:
        handle = client.start("checkout", {"id": "o3", "amount": 3.0}, execution_id="o3")
        assert lane_of(path, "o3") == ""
        assert handle.status() is Status.PENDING
        # Visible where `raftflow queue` looks: the unrouted lane holds it, nobody serves it.
        depths = client.store.run(LaneFlows(client.store.clock).depths())
        assert [(d.lane, d.groups, d.workers) for d in depths] == [("", 1, 0)]
        with serving(url, "v7"):
            assert handle.result(timeout=30)["version"] == "v7"


def test_workers_known_but_none_serving_it_refuses_the_start_and_writes_nothing(
    db: tuple[Path, str],
) -> None:
    path, url = db
    with serving(url, "v1"), Client.from_url(url) as client:
        before = counts(path)
        with pytest.raises(UnknownWorkflowError) as typo:
            client.start("chekout", {"id": "o4", "amount": 1.0})
        assert "'chekout'" in str(typo.value) and "'default'" in str(typo.value)
        assert "'checkout' in 'default'" in str(typo.value)  # what they do serve
        with pytest.raises(UnknownWorkflowError) as other_queue:
            client.start("checkout", {"id": "o4", "amount": 1.0}, queue="billing")
        assert "'billing'" in str(other_queue.value)
        assert counts(path) == before


def test_send_get_event_cancel_resume_and_fork_by_id(db: tuple[Path, str]) -> None:
    _, url = db
    with serving(url, "v1"), Client.from_url(url) as client:
        handle = client.start("approval", {"id": "o5", "amount": 5.0})
        assert client.get_event(handle.id, "asked", timeout=30) == {"order": "o5"}
        client.send(handle.id, "yes", topic="review")
        assert handle.result(timeout=30) == "o5: yes"
        waiting = client.start("approval", {"id": "o6", "amount": 6.0})
        client.get_event(waiting.id, "asked", timeout=30)
        assert waiting.cancel() in (Status.PENDING, Status.RUNNING)
        wait_until(lambda: waiting.status() is Status.CANCELLED, timeout=30)
        assert client.resume(waiting.id, to_current_version=True)
        client.send(waiting.id, "again", topic="review")
        assert waiting.result(timeout=30) == "o6: again"
        fork = client.fork(handle.id, 1)
        client.send(fork.id, "forked", topic="review")
        assert fork.result(timeout=30) == "o5: forked"


def test_an_input_the_workflow_refuses_fails_its_execution(db: tuple[Path, str]) -> None:
    _, url = db
    with serving(url, "v1"), Client.from_url(url) as client:
        handle = client.start("checkout", {"id": "o7"})  # no amount: the worker's code says
        with pytest.raises(WorkflowFailedError):
            handle.result(timeout=30)


def test_the_command_starts_by_name_without_an_app(
    db: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path, url = db
    order = '{"id": "c1", "amount": 4}'
    with serving(url, "v3"):
        assert main(["start", "checkout", order, "--id", "c1", "--wait", "--url", url]) == 0
        assert json.loads(capsys.readouterr().out)["version"] == "v3"
        assert main(["start", "checkout", order, "--queue", "billing", "--url", url]) == 1
        assert "UnknownWorkflowError" in capsys.readouterr().err
    assert lane_of(path, "c1") == "default/checkout@v3"


def test_the_async_client(db: tuple[Path, str]) -> None:
    _, url = db

    async def main() -> tuple[Any, Status, list[str]]:
        async with await AsyncClient.from_url(url) as client:
            handle = await client.start(
                "checkout", Order(id="a1", amount=1.5), execution_id="a1", output_type=Receipt
            )
            result = await handle.result(timeout=30)
            status = await (await client.get("a1")).status()
            return result, status, [r.id for r in await client.list()]

    with serving(url, "v1"):
        assert asyncio.run(main()) == (
            Receipt(order="a1", charged=1.5, version="v1"),
            Status.SUCCEEDED,
            ["a1"],
        )


# -- the choice of a lane, on what the workers' rows say -----------------------------------

CHECKOUT = ("", "default/checkout@v1", "default/refund@v1")


def test_no_worker_reporting_lanes_means_the_unrouted_lane() -> None:
    assert choose_lane("default", "checkout", []) == ""
    assert choose_lane("default", "checkout", [RunningWorker(None, 1.0)]) == ""


def test_a_worker_of_an_earlier_release_does_not_stand_for_the_others() -> None:
    workers = [RunningWorker(None, 1.0), RunningWorker(("", "default/refund@v1"), 2.0)]
    with pytest.raises(UnknownWorkflowError):
        choose_lane("default", "checkout", workers)


def test_a_tie_goes_to_the_most_recently_started_workers_version() -> None:
    v2 = tuple(lane.replace("@v1", "@v2") for lane in CHECKOUT)
    older_v2 = [RunningWorker(CHECKOUT, 5.0), RunningWorker(v2, 3.0)]
    assert choose_lane("default", "checkout", older_v2) == "default/checkout@v1"
    newer_v2 = [RunningWorker(CHECKOUT, 5.0), RunningWorker(v2, 7.0)]
    assert choose_lane("default", "checkout", newer_v2) == "default/checkout@v2"


def test_a_worker_adopting_an_older_version_counts_for_its_own() -> None:
    # A v2 worker that adopted v1's checkout lane (no v1 worker left): its own version is
    # the one it serves every workflow at.
    adopter = RunningWorker(
        ("", "default/checkout@v1", "default/checkout@v2", "default/refund@v2"), 1.0
    )
    assert choose_lane("default", "checkout", [adopter]) == "default/checkout@v2"
