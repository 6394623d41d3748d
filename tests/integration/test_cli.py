"""The ``raftflow`` command as a subprocess against the shared 3-node cluster, with a real
worker process (metrics on, JSON logs): every command, ``--json``, the exit codes, and a
Prometheus scrape during the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from raftflow.stores.inspect import Inspector
from raftflow.transports.rqlite.local import LocalCluster
from raftflow.transports.rqlite.local.ports import pick_free_ports

from raftflow import Engine
from tests.integration.workers import WorkerProcess, rotated_url
from tests.support import clear_tables, wait_until

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.apps.ops:engine"
ORDER = '{"id": "%s", "amount": 12.5}'


def raftflow(
    *args: str, url: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTFLOW_URL")}
    if url is not None:
        env["RAFTFLOW_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "raftflow", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok_json(*args: str, url: str) -> Any:
    done = raftflow(*args, "--json", url=url)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def url(rqlite_cluster: LocalCluster) -> str:
    clear_tables(rqlite_cluster.url)
    return rotated_url(rqlite_cluster.urls, 1)


@pytest.fixture(scope="module")
def worker(
    url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[WorkerProcess, int]]:
    (port,) = pick_free_ports(1)
    log = tmp_path_factory.mktemp("cli") / "worker.log"
    process = WorkerProcess(
        APP,
        url,
        log,
        concurrency=4,
        worker_id="cli-worker",
        metrics_port=port,
        log_format="json",
    )
    try:
        wait_until(lambda: _scrape(port) is not None, timeout=30)
        yield process, port
    finally:
        process.stop()
        raftflow("schedules", "--remove", "nightly", url=url)  # the app's, made by the worker


def _scrape(port: int) -> str | None:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
    except httpx.HTTPError:
        return None


def test_refusals_and_an_unavailable_cluster_have_their_exit_codes(url: str) -> None:
    # Usage errors (exit 2) are checked in-process: tests/unit/test_command_line.py.
    invalid = raftflow("start", "checkout", '{"id": 1}', "--app", APP, url=url)
    assert invalid.returncode == 2 and "InputValidationError" in invalid.stderr
    missing = raftflow("result", "no-such-execution", "--json", url=url)
    assert missing.returncode == 1 and "ExecutionNotFoundError" in missing.stderr
    down = raftflow(
        "list",
        "--connect-timeout",
        "0.5",
        "--retry-timeout",
        "0.5",
        url="http://operator:s3cret-Passw0rd@127.0.0.1:9",
    )
    assert down.returncode == 3 and "UnavailableError" in down.stderr
    assert "s3cret-Passw0rd" not in down.stdout + down.stderr


def test_start_wait_result_get_steps_list_send_cancel_queue_and_workers(
    url: str, worker: tuple[WorkerProcess, int]
) -> None:
    process, port = worker
    client = Engine.from_url(url)  # in-process polls, so that only the checks spawn the CLI
    inspector = Inspector(client.store.database)
    # start --wait: the output, exit 0; piped, no progress line on stderr.
    done = raftflow(
        "start",
        "checkout",
        ORDER % "o-1",
        "--app",
        APP,
        "--id",
        "cli-ok",
        "--wait",
        "--timeout",
        "60",
        url=url,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"reservation": "rsv-o-1", "payment": "pay-o-1-12.50"}
    assert done.stderr == ""

    # A failing execution: exit 1, its error (and traceback) on stderr; its steps.
    failed = raftflow(
        "start", "refund", ORDER % "o-2", "--app", APP, "--id", "cli-failed", "--wait", url=url
    )
    assert failed.returncode == 1
    assert "ConnectionError" in failed.stderr and "Traceback" in failed.stderr
    steps = ok_json("steps", "cli-failed", url=url)
    assert [(s["name"], s["status"], s["attempts"]) for s in steps] == [
        ("reserve", "succeeded", 1),
        ("call_bank", "failed", 2),
    ]
    assert steps[1]["history"][0]["type"] == "ConnectionError"

    # Waiting for a signal: parked; get says so; send wakes it; result is its output.
    started = ok_json("start", "approval", ORDER % "o-3", "--app", APP, "--id", "cli-wait", url=url)
    assert started == {"id": "cli-wait", "created": True}
    wait_until(lambda: inspector.detail("cli-wait").queued[0].parked, timeout=30)
    human = raftflow("get", "cli-wait", url=url)
    assert human.returncode == 0 and "parked" in human.stdout and "approval" in human.stdout
    sent = raftflow("send", "cli-wait", '{"ok": true}', "--topic", "review", url=url)
    assert sent.returncode == 0 and "sent to cli-wait" in sent.stdout
    assert json.loads(raftflow("result", "cli-wait", "--timeout", "60", url=url).stdout) == (
        "pay-o-3-12.50"
    )

    # Cancel one that waits: result then exits 1, as cancelled.
    ok_json("start", "approval", ORDER % "o-4", "--app", APP, "--id", "cli-cancel", url=url)
    wait_until(lambda: (client.store.get("cli-cancel") or _none()).steps_done == 1, timeout=30)
    assert ok_json("cancel", "cli-cancel", url=url)["cancelled"] is True
    cancelled = raftflow("result", "cli-cancel", "--timeout", "60", "--json", url=url)
    assert cancelled.returncode == 1
    assert json.loads(cancelled.stdout)["status"] == "cancelled"

    # Lists, filtered by status, workflow and time, newest first.
    rows = ok_json("list", "--since", "1h", url=url)
    assert [r["id"] for r in rows][:1] == ["cli-cancel"] and len(rows) == 4
    by_workflow = ok_json("list", "--workflow", "approval", "--status", "succeeded", url=url)
    assert [r["id"] for r in by_workflow] == ["cli-wait"]

    # One that holds a lease or waits while we look: queue and workers.
    ok_json("start", "approval", ORDER % "o-5", "--app", APP, "--id", "cli-held", url=url)
    queue = ok_json("queue", url=url)
    assert [p["priority"] for p in queue["priorities"]] == [4, 3, 2, 1, 0]
    assert queue["parked"] + queue["ready"] + queue["leases"] >= 1
    seen = ok_json("workers", url=url)
    assert [w["worker_id"] for w in seen] == ["cli-worker"]
    assert seen[0]["state"] == "running" and seen[0]["concurrency"] == 4  # (steps: as of its
    # last beat, up to 10 s old)
    client.close()

    # The worker's metrics, scraped while it runs.
    text = wait_until(lambda: _scrape(port), timeout=10)
    assert re.search(
        r'raftflow_steps_total\{outcome="succeeded",step="reserve",'
        r'workflow="checkout"\} 1\.0',
        text,
    ), text
    assert re.search(r'raftflow_executions_total\{outcome="failed",workflow="refund"\} 1\.0', text)
    assert re.search(
        r'raftflow_step_retries_total\{step="call_bank",workflow="refund"\} 1\.0', text
    )
    for name in (
        "raftflow_claim_duration_seconds_count",
        "raftflow_commit_duration_seconds_count",
        "raftflow_commit_batch_size_count",
        "raftflow_step_to_step_seconds_count",
        "raftflow_leases_held",
        "raftflow_fenced_commits_total",
    ):
        assert name in text, name
    # The only worker with metrics holds the sampling duty: it exports the queue's depth.
    wait_until(lambda: "raftflow_queue_depth{" in (_scrape(port) or ""), timeout=25)

    # JSON logs name the execution (the worker logs each cancel, hand-back...).
    process.stop()
    lines = [json.loads(line) for line in process.output().splitlines() if line.startswith("{")]
    assert lines and all(
        {"time", "level", "message", "execution_id", "step"} <= set(x) for x in lines
    )
    assert any(x["execution_id"] == "cli-cancel" for x in lines), lines


def _none() -> Any:
    raise AssertionError("the execution is gone")
