"""raftflow.Client on the shared 3-node cluster: a worker process runs the app
(tests/apps/ops.py); the starts by name come from processes that cannot import it -- a
script run isolated (``python -I``, outside the repository) and the ``raftflow start``
command without ``--app`` -- and from this one, which does not import it either."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from raftflow.stores.lanes import LaneFlows
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Client, Status, WorkflowCancelledError
from raftflow.errors import UnknownWorkflowError
from tests.integration.workers import WorkerProcess, rotated_url
from tests.support import clear_tables, wait_until

APP = "tests.apps.ops:engine"

#: Run with ``python -I`` in a temporary directory: neither the repository nor
#: PYTHONPATH is on its sys.path, raftflow (installed) is.
BY_NAME = """
import importlib.util, json, sys
from raftflow import Client
assert importlib.util.find_spec("tests") is None, "the app's package is importable"
with Client.from_url(sys.argv[1]) as client:
    handle = client.start("checkout", {"id": "i1", "amount": 3}, execution_id="by-name-i1")
    print(json.dumps({"created": handle.created, "output": handle.result(timeout=60)}))
"""


#: The same, for workflows whose decorator sets a timeout (``deadline``) and a limit
#: (``settle``: one at a time): the client applies them as the app's engine would.
WITH_SETTINGS = """
import importlib.util, json, sys
from raftflow import Client
assert importlib.util.find_spec("tests") is None, "the app's package is importable"
with Client.from_url(sys.argv[1]) as client:
    client.start("deadline", {"id": "d1", "amount": 1}, execution_id="by-name-d1")
    for i in range(3):
        client.start("settle", {"id": f"s{i}", "amount": 1}, execution_id=f"by-name-s{i}")
"""


@pytest.fixture(scope="module")
def url(rqlite_cluster: LocalCluster) -> str:
    clear_tables(rqlite_cluster.url)
    return rotated_url(rqlite_cluster.urls, 2)


@pytest.fixture(scope="module")
def client(url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    log = tmp_path_factory.mktemp("client") / "worker.log"
    worker = WorkerProcess(APP, url, log, concurrency=4, worker_id="client-worker")
    try:
        with Client.from_url(url) as client:
            flows = LaneFlows(client.store.clock)

            def serves_checkout() -> bool:
                _, served = client.store.run(flows.present(""))
                return any(str(lane).startswith("default/checkout@") for lane in served)

            wait_until(serves_checkout, timeout=60, interval=0.2)
            yield client
    finally:
        worker.stop()
        assert "Traceback" not in worker.output(), worker.output()


def isolated(args: list[str], cwd: Path, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAFTFLOW_", "PYTHON"))}
    return subprocess.run(
        [sys.executable, "-I", *args, url],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_process_without_the_app_starts_it_by_name_and_gets_the_result(
    client: Client, url: str, tmp_path: Path
) -> None:
    done = isolated(["-c", BY_NAME], tmp_path, url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "created": True,
        "output": {"reservation": "rsv-i1", "payment": "pay-i1-3.00"},
    }
    assert client.get("by-name-i1").status() is Status.SUCCEEDED


def test_the_command_starts_by_name_without_an_app(
    client: Client, url: str, tmp_path: Path
) -> None:
    start = ["-m", "raftflow", "start", "checkout", '{"id": "i2", "amount": 1}']
    done = isolated([*start, "--id", "cli-i2", "--wait", "--url"], tmp_path, url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"reservation": "rsv-i2", "payment": "pay-i2-1.00"}
    refused = isolated(["-m", "raftflow", "start", "chekout", "{}", "--url"], tmp_path, url)
    assert refused.returncode == 1 and "UnknownWorkflowError" in refused.stderr


def test_steer_by_id_and_refuse_an_unknown_name(client: Client) -> None:
    handle = client.start("approval", {"id": "i3", "amount": 2}, execution_id="by-name-i3")
    wait_until(lambda: handle.info().steps_done >= 1, timeout=60, interval=0.1)
    client.send(handle.id, {"ok": True}, topic="review")
    assert handle.result(timeout=60) == "pay-i3-2.00"
    assert "by-name-i3" in [r.id for r in client.list(status="succeeded")]
    before = len(client.list(limit=1000))
    with pytest.raises(UnknownWorkflowError):
        client.start("approval", {"id": "i4", "amount": 2}, queue="nobody-serves-this")
    assert len(client.list(limit=1000)) == before


def test_a_start_by_name_applies_the_workflows_timeout_and_limit(
    client: Client, url: str, tmp_path: Path
) -> None:
    done = isolated(["-c", WITH_SETTINGS], tmp_path, url)
    assert done.returncode == 0, done.stderr
    # The timeout: cancelled at its deadline, as a start by the app's engine is.
    timed = client.get("by-name-d1")
    with pytest.raises(WorkflowCancelledError, match="timeout"):
        timed.result(timeout=60)

    # The limit: one settlement at a time, whatever the database is asked meanwhile.
    def running() -> list[str]:
        return [r.id for r in client.list(status="running") if r.workflow == "settle"]

    most = 0
    for i in range(3):
        handle = client.get(f"by-name-s{i}")
        wait_until(lambda h=handle: h.status() is Status.RUNNING, timeout=60, interval=0.1)
        watch_until = time.monotonic() + 1.0
        while time.monotonic() < watch_until:
            most = max(most, len(running()))
        client.send(handle.id, {"ok": True}, topic="settled")
        assert handle.result(timeout=60) == "settled"
    assert most == 1
