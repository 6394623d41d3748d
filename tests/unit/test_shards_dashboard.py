"""The dashboard on a sharded deployment of two SQLite files (its ASGI app, Starlette's test
client): the lists merge every cluster, an execution's page, its actions and its live
stream go to its own cluster, behind the same Host and CSRF checks as on one cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.ops.ui.server import Settings

from raftflow import Engine, Status
from tests.support import wait_until
from tests.unit.test_shards import urls
from tests.unit.test_shards_cli import on, spread
from tests.unit.test_ui_security import BASE, client
from tests.unit.test_ui_streams import events


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine(url=urls(tmp_path), version="1")

    @engine.workflow
    def waits() -> Any:
        return engine.recv("go", timeout=120)

    @engine.workflow
    def produce(n: int) -> int:
        for i in range(n):
            engine.write_stream("tokens", {"i": i})
        engine.close_stream("tokens")
        return n

    yield engine
    engine.close()


def test_the_lists_merge_every_cluster_and_an_execution_page_reads_its_own(
    engine: Engine,
) -> None:
    ids = spread(engine, "wait", each=2)
    far = on(engine, "shard-2", "wait")
    with engine.running_worker(worker_id="ui-worker"), client(engine, Settings()) as browser:
        for execution_id in ids:
            engine.start("waits", execution_id=execution_id)
        wait_until(lambda: all(r.status is Status.RUNNING for r in engine.list()))
        listed = browser.get("/executions")
        assert listed.status_code == 200 and "<th>Cluster</th>" in listed.text
        assert all(f">{execution_id}</a>" in listed.text for execution_id in ids)
        assert browser.get("/api/counts").json()["running"] == 4
        page = browser.get(f"/executions/{far}")
        assert page.status_code == 200 and '<dd id="cluster">shard-2</dd>' in page.text
        queue = browser.get("/queue").text
        assert "<td>waits</td>" in queue and '<strong id="parked">4</strong>' in queue
        workers = browser.get("/workers").text
        assert "ui-worker" in workers and "shard-1, shard-2" in workers
        assert browser.get("/schedules").status_code == 200
        assert browser.get(f"/send?id={far}").status_code == 200  # the confirmation page
        csrf = browser.cookies["raftflow_csrf"]
        form = {"id": far, "topic": "go", "message": '"from the ui"', "csrf": csrf}
        forged = browser.post("/send", data={**form, "csrf": "forged"}, headers={"Origin": BASE})
        assert forged.status_code == 403
        sent = browser.post("/send", data=form, headers={"Origin": BASE}, follow_redirects=False)
        assert sent.status_code == 303
        assert engine.get(far).result(timeout=30) == "from the ui"


def test_the_live_stream_of_an_execution_on_another_cluster(engine: Engine) -> None:
    far = on(engine, "shard-2", "produce")
    with engine.running_worker(), client(engine, Settings()) as browser:
        assert engine.start("produce", 3, execution_id=far).result(timeout=30) == 3
        response = browser.get(f"/api/stream?id={far}&key=tokens")
        assert response.status_code == 200
        assert [data for kind, _id, data in events(response.text) if kind == "message"] == [
            {"i": 0},
            {"i": 1},
            {"i": 2},
        ]
        assert browser.get(f"/api/stream?id={far}-nope&key=tokens").status_code == 404
