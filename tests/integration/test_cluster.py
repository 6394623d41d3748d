"""LocalCluster against the real rqlited 8.26.8 binary: no mocks of rqlite."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from raftflow.transports.rqlite.local import (
    ClusterError,
    LocalCluster,
    Node,
    NodeExitedError,
    started_pids,
)
from raftflow.transports.rqlite.local import cluster as cluster_mod

Factory = Callable[..., LocalCluster]


def execute(url: str, statements: list[list[Any]], **kwargs: Any) -> dict[str, Any]:
    response = httpx.post(f"{url}/db/execute", json=statements, timeout=10, **kwargs)
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    assert "error" not in body, body
    for result in body["results"]:
        assert "error" not in result, body
    return body


def query(url: str, sql: str, level: str = "strong", **kwargs: Any) -> list[list[Any]]:
    response = httpx.post(
        f"{url}/db/query", params={"level": level}, json=[[sql]], timeout=10, **kwargs
    )
    response.raise_for_status()
    result = response.json()["results"][0]
    assert "error" not in result, result
    values: list[list[Any]] = result.get("values", [])
    return values


def table_name() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


def wait_for_rows(node: Node, sql: str, expected: list[list[Any]], timeout: float = 5.0) -> None:
    """Poll a node's local (level=none) copy until it has caught up."""
    deadline = time.monotonic() + timeout
    rows: list[list[Any]] | str = []
    while time.monotonic() < deadline:
        try:
            rows = query(node.url, sql, level="none")
            if rows == expected:
                return
        except (httpx.HTTPError, AssertionError) as exc:  # down, or table not there yet
            rows = repr(exc)
        time.sleep(0.05)
    raise AssertionError(f"{node!r} still has {rows!r}, want {expected!r}")


def assert_all_dead(pids: list[int]) -> None:
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # not even a zombie: LocalCluster reaps what it stops
        assert not psutil.pid_exists(pid)


# --------------------------------------------------------------------------- shared cluster


def test_every_node_answers_and_there_is_exactly_one_leader(rqlite_cluster: LocalCluster) -> None:
    states = []
    for node in rqlite_cluster.nodes:
        assert httpx.get(f"{node.url}/readyz", timeout=5).status_code == 200
        status = httpx.get(f"{node.url}/status", timeout=5).json()
        states.append(status["store"]["raft"]["state"])
    assert sorted(states) == ["Follower", "Follower", "Leader"]
    leader = rqlite_cluster.leader()
    assert states[rqlite_cluster.nodes.index(leader)] == "Leader"
    assert len(rqlite_cluster.followers()) == 2


def test_write_through_follower_is_readable_on_leader(rqlite_cluster: LocalCluster) -> None:
    table = table_name()
    follower = rqlite_cluster.followers()[0]
    execute(
        follower.url,
        [
            [f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v TEXT)"],
            [f"INSERT INTO {table} (v) VALUES (?)", "via follower"],
        ],
    )
    leader = rqlite_cluster.leader()
    assert query(leader.url, f"SELECT v FROM {table}") == [["via follower"]]


def test_single_node_fixture(rqlite_node: LocalCluster) -> None:
    table = table_name()
    execute(rqlite_node.url, [[f"CREATE TABLE {table} (x)"], [f"INSERT INTO {table} VALUES (1)"]])
    assert query(rqlite_node.url, f"SELECT x FROM {table}", level="weak") == [[1]]
    assert rqlite_node.leader() is rqlite_node.nodes[0]


# --------------------------------------------------------------------------- dedicated clusters


def test_leader_kill_failover_and_catch_up(rqlite_cluster_factory: Factory) -> None:
    cluster = rqlite_cluster_factory(3)
    table = table_name()
    execute(
        cluster.url, [[f"CREATE TABLE {table} (x INTEGER)"], [f"INSERT INTO {table} VALUES (1)"]]
    )

    old_leader = cluster.leader()
    old_pid = old_leader.pid
    assert old_pid is not None
    cluster.kill(old_leader)  # SIGKILL
    assert not old_leader.is_running()
    assert_all_dead([old_pid])

    new_leader = cluster.leader(timeout=10)  # elected within 10 s, or it raises
    assert new_leader is not old_leader

    survivor = next(n for n in cluster.running_nodes() if n is not new_leader)
    execute(survivor.url, [[f"INSERT INTO {table} VALUES (2)"]])
    assert query(new_leader.url, f"SELECT x FROM {table} ORDER BY x") == [[1], [2]]

    cluster.start_node(old_leader)  # same data dir and args
    assert old_leader.is_running() and old_leader.pid != old_pid
    wait_for_rows(old_leader, f"SELECT x FROM {table} ORDER BY x", [[1], [2]])
    cluster.wait_ready(10)
    assert cluster.leader() is new_leader  # a rejoining node does not disrupt the leader


def test_full_stop_and_restart_keeps_data(rqlite_cluster_factory: Factory) -> None:
    cluster = rqlite_cluster_factory(3)
    table = table_name()
    execute(cluster.url, [[f"CREATE TABLE {table} (x)"], [f"INSERT INTO {table} VALUES ('kept')"]])
    old_pids = [n.pid for n in cluster.nodes]

    cluster.stop_all_nodes()
    assert not any(n.is_running() for n in cluster.nodes)
    assert_all_dead([p for p in old_pids if p is not None])
    assert all((n.data_dir / "raft.db").exists() for n in cluster.nodes)

    cluster.start_all_nodes()
    for node in cluster.nodes:
        assert query(node.url, f"SELECT x FROM {table}") == [["kept"]]


def test_stop_leaves_no_process_and_no_temp_dir(rqlite_cluster_factory: Factory) -> None:
    cluster = rqlite_cluster_factory(3)
    pids = [n.pid for n in cluster.nodes if n.pid is not None]
    root = cluster.root
    assert len(pids) == 3 and root is not None and root.exists()
    assert set(pids) <= set(started_pids())
    paused = cluster.nodes[1]
    cluster.pause(paused)  # a SIGSTOPped node must be stopped too
    cluster.stop()
    assert_all_dead(pids)
    assert not root.exists()
    assert not set(pids) & set(started_pids())
    cluster.stop()  # idempotent


def test_pause_and_resume_a_follower(rqlite_cluster_factory: Factory) -> None:
    cluster = rqlite_cluster_factory(3)
    follower = cluster.followers()[0]
    cluster.pause(follower)
    assert psutil.Process(follower.pid).status() == psutil.STATUS_STOPPED
    table = table_name()
    execute(
        cluster.leader().url, [[f"CREATE TABLE {table} (x)"], [f"INSERT INTO {table} VALUES (7)"]]
    )
    cluster.resume(follower)
    wait_for_rows(follower, f"SELECT x FROM {table}", [[7]])


def test_base_dir_is_kept_and_reused(tmp_path: Path, rqlited_path: Path) -> None:
    table = table_name()
    with LocalCluster(3, binary=rqlited_path, base_dir=tmp_path) as cluster:
        execute(cluster.url, [[f"CREATE TABLE {table} (x)"], [f"INSERT INTO {table} VALUES (3)"]])
        first_urls = cluster.urls
        with pytest.raises(ClusterError, match="is a cluster still running on"):
            LocalCluster(3, binary=rqlited_path, base_dir=tmp_path).start()
        assert query(cluster.url, f"SELECT x FROM {table}") == [[3]]  # the first is unharmed
    assert (tmp_path / "node1" / "rqlited.log").exists()
    assert json.loads((tmp_path / "cluster.json").read_text())["size"] == 3
    with LocalCluster(3, binary=rqlited_path, base_dir=tmp_path) as cluster:
        assert cluster.urls == first_urls  # same ports, so the saved Raft config still holds
        assert query(cluster.url, f"SELECT x FROM {table}") == [[3]]


def test_port_collision_on_first_start_is_retried(
    rqlite_cluster_factory: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        busy = squatter.getsockname()[1]
        real_pick = cluster_mod.pick_free_ports
        calls = []

        def pick(count: int, **kwargs: Any) -> list[int]:
            calls.append(count)
            ports = real_pick(count, exclude=[busy])
            return [busy, *ports[1:]] if len(calls) == 1 else ports

        monkeypatch.setattr(cluster_mod, "pick_free_ports", pick)
        cluster = rqlite_cluster_factory(1)
        assert len(calls) == 2
        assert cluster.nodes[0].http_port != busy


def test_node_that_cannot_start_reports_its_log(rqlite_cluster_factory: Factory) -> None:
    with pytest.raises(NodeExitedError) as info:
        rqlite_cluster_factory(1, extra_args=["-no-such-flag"])
    assert "exited with code" in str(info.value)
    assert "no-such-flag" in str(info.value)  # rqlited's own complaint, from the log tail


def test_auth_and_tls(rqlite_cluster_factory: Factory, tmp_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_pem, key_pem, ca_pem = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(cert_pem)
    cert.private_key_pem.write_to_path(key_pem)
    ca.cert_pem.write_to_path(ca_pem)
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps([{"username": "admin", "password": "s3cret", "perms": ["all"]}]))

    cluster = rqlite_cluster_factory(
        3,
        auth_file=auth,
        probe_auth=("admin", "s3cret"),
        http_cert=cert_pem,
        http_key=key_pem,
        probe_verify=str(ca_pem),
    )
    assert all(url.startswith("https://127.0.0.1:") for url in cluster.urls)
    ctx = ssl.create_default_context(cafile=str(ca_pem))
    anonymous = httpx.post(f"{cluster.url}/db/execute", json=[["SELECT 1"]], verify=ctx)
    assert anonymous.status_code == 401
    table = table_name()
    follower = cluster.followers()[0]
    execute(follower.url, [[f"CREATE TABLE {table} (x)"]], auth=("admin", "s3cret"), verify=ctx)
    assert (
        query(cluster.leader().url, f"SELECT * FROM {table}", auth=("admin", "s3cret"), verify=ctx)
        == []
    )


# --------------------------------------------------------------------------- CLI


def test_cli_runs_until_sigterm_and_cleans_up(rqlited_path: Path) -> None:
    env = {**os.environ, "RQLITED": str(rqlited_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "raftflow.transports.rqlite.local", "--nodes", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(cluster_mod.__file__).resolve().parents[4],
    )
    try:
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        node_lines = [line.split("\t") for line in lines if line.startswith("node")]
        assert len(node_lines) == 3, lines
        assert [fields[2] for fields in node_lines].count("leader") == 1
        pids = [int(fields[3].removeprefix("pid=")) for fields in node_lines]
        for fields in node_lines:
            assert httpx.get(f"{fields[1]}/readyz", timeout=5).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert_all_dead(pids)  # the CLI stopped and reaped its nodes before exiting
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_probes_without_credentials_fail_fast(
    rqlite_cluster_factory: Factory, tmp_path: Path
) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps([{"username": "admin", "password": "pw", "perms": ["all"]}]))
    started = time.monotonic()
    with pytest.raises(ClusterError, match="answered 401: pass probe_auth"):
        rqlite_cluster_factory(1, auth_file=auth, startup_timeout=90)
    assert time.monotonic() - started < 45  # at the first 401, not at the startup timeout
