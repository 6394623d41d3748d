"""Workers and the CLI against an rqlite node with -auth: per-user permissions, and
passwords that never show in output, logs or errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine
from tests.apps import ordering
from tests.apps.ordering import Spec
from tests.integration.workers import ROOT, WorkerProcess

ADMIN = ("admin", "adm1n-S3cret!")
WORKER = ("worker", "w0rker-S3cret#")
READER = ("reader", "r3ader-S3cret$")
# Unencoded in a URL: '#', '/' and '?' would end its authority; '@' is not its last.
OPS = ("ops", "0ps#S3c/r?t@x")
SECRETS = [ADMIN[1], WORKER[1], READER[1], OPS[1], "n0t-the-Passw0rd"]


def url_for(node_url: str, user: str, password: str) -> str:
    scheme, _, host = node_url.partition("://")
    return f"{scheme}://{quote(user)}:{quote(password, safe='')}@{host}"


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text and quote(secret, safe="") not in text


@pytest.fixture(scope="module")
def auth_node(
    rqlited_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    folder = tmp_path_factory.mktemp("engine-auth")
    users = [
        {"username": ADMIN[0], "password": ADMIN[1], "perms": ["all"]},
        {
            "username": WORKER[0],
            "password": WORKER[1],
            "perms": ["execute", "query", "ready", "status"],
        },
        {"username": READER[0], "password": READER[1], "perms": ["query", "ready", "status"]},
        {"username": OPS[0], "password": OPS[1], "perms": ["query", "ready", "status"]},
    ]
    (folder / "users.json").write_text(json.dumps(users))
    with LocalCluster(
        1, binary=rqlited_path, auth_file=folder / "users.json", probe_auth=ADMIN
    ) as cluster:
        yield cluster


def test_permissions_per_user(auth_node: LocalCluster, tmp_path: Path) -> None:
    ordering.engine.connect(url_for(auth_node.url, *ADMIN))
    try:
        handle = ordering.engine.start(ordering.sequence, Spec(log_dir=str(tmp_path), steps=2))

        reader = WorkerProcess(
            "tests.apps.ordering:engine", url_for(auth_node.url, *READER), tmp_path / "reader.log"
        )
        assert reader.process.wait(timeout=60) == 1  # refused, not retrying forever
        reader.stop()
        output = reader.output()
        assert "AuthenticationError" in output and "401" in output
        assert_no_secret(output)

        worker = WorkerProcess(
            "tests.apps.ordering:engine", url_for(auth_node.url, *WORKER), tmp_path / "worker.log"
        )
        try:
            assert handle.result(timeout=60) == [0, 1]
        finally:
            worker.stop()
        assert_no_secret(worker.output())
    finally:
        ordering.engine.close()


def test_wrong_password_is_a_clear_cli_error(auth_node: LocalCluster) -> None:
    url = url_for(auth_node.url, ADMIN[0], "n0t-the-Passw0rd")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "raftflow.engine.ops.cli",
            "executions",
            "tests.apps.ordering:engine",
            "--url",
            url,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "AuthenticationError" in result.stderr
    assert_no_secret(result.stdout + result.stderr)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftflow", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_a_password_unencoded_in_the_url_or_from_a_file_works_and_never_shows(
    auth_node: LocalCluster, tmp_path: Path
) -> None:
    scheme, _, host = auth_node.url.partition("://")
    raw = cli("list", "--url", f"{scheme}://{OPS[0]}:{OPS[1]}@{host}")
    assert raw.returncode == 0, raw.stderr[-2000:]
    assert_no_secret(raw.stdout + raw.stderr)

    secret_file = tmp_path / "rqlite-password"
    secret_file.write_text(OPS[1] + "\n")
    from_file = cli(
        "list", "--url", f"{scheme}://{OPS[0]}@{host}", "--password-file", str(secret_file)
    )
    assert from_file.returncode == 0, from_file.stderr[-2000:]
    from_env = cli(
        "list",
        "--url",
        auth_node.url,
        env={"RAFTFLOW_USERNAME": OPS[0], "RAFTFLOW_PASSWORD_FILE": str(secret_file)},
    )
    assert from_env.returncode == 0, from_env.stderr[-2000:]
    secret_file.write_text("n0t-the-Passw0rd\n")
    wrong = cli("list", "--url", f"{scheme}://{OPS[0]}@{host}", "--password-file", str(secret_file))
    assert wrong.returncode == 1 and "AuthenticationError" in wrong.stderr
    for result in (from_file, from_env, wrong):
        assert_no_secret(result.stdout + result.stderr)


def test_reader_can_read_but_not_start(auth_node: LocalCluster) -> None:
    with Engine.from_url(url_for(auth_node.url, *ADMIN)) as admin:

        @admin.workflow
        def noop() -> None:
            return None

        admin.start(noop, execution_id="seen-by-reader")
    from raftflow.stores.rqlite import RqliteStore

    from raftflow.errors import AuthenticationError

    store = RqliteStore.from_url(url_for(auth_node.url, *READER), create_schema=False)
    try:
        assert store.get("seen-by-reader") is not None
        with pytest.raises(AuthenticationError) as caught:
            store.start("nope", "noop", None, event={"kind": "run"})
        assert_no_secret(str(caught.value) + repr(store) + repr(store.config))
    finally:
        store.close()
