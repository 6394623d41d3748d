"""The transport on an rqlite node started with ``-auth``: credentials, permissions, secrecy.

Users: ``admin`` (all permissions) and ``reader`` (query, status and ready only). Each
test runs on httpx, requests and the async twin.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from raftflow.transports.contract import QueueStats
from raftflow.transports.rqlite.local import LocalCluster, pick_free_ports

from raftflow.errors import AuthenticationError, UnavailableError

# Characters that must be percent-encoded in a URL: parsing them is part of the test.
ADMIN_PASSWORD = "s3cret:p@ss/w0rd%"
READER_PASSWORD = "read-only-Pa55"
WRONG_PASSWORD = "Wr0ng-Pa55-xyzzy"
SECRETS = (ADMIN_PASSWORD, READER_PASSWORD, WRONG_PASSWORD)


def url_of(node_url: str, user: str, password: str) -> str:
    scheme, _, host = node_url.partition("://")
    return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{host}"


@pytest.fixture(scope="module")
def auth_node(
    rqlited_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    folder = tmp_path_factory.mktemp("auth")
    users = [
        {"username": "admin", "password": ADMIN_PASSWORD, "perms": ["all"]},
        {"username": "reader", "password": READER_PASSWORD, "perms": ["query", "status", "ready"]},
    ]
    (folder / "users.json").write_text(json.dumps(users))
    with LocalCluster(
        1,
        binary=rqlited_path,
        base_dir=folder / "data",
        auth_file=folder / "users.json",
        probe_auth=("admin", ADMIN_PASSWORD),
    ) as cluster:
        yield cluster


@pytest.fixture
def admin(auth_node: LocalCluster, connect: Callable[..., Any]) -> Iterator[Any]:
    """An admin transport (schema created) on an empty queue."""
    transport = connect(url_of(auth_node.url, "admin", ADMIN_PASSWORD))
    yield transport
    while (lease := transport.claim("cleanup", visibility=30)) is not None:
        transport.ack(lease)


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        for form in (secret, quote(secret, safe="")):
            assert form not in text, f"a password shows in {where}: {text!r}"


def test_credentials_in_the_url_work(admin: Any) -> None:
    admin.publish("g", {"n": 1})
    lease = admin.claim("w", visibility=30)
    assert lease is not None and lease.event == {"n": 1}
    admin.ack(lease)
    assert admin.stats() == QueueStats(messages=0, leased=0, parked=0, groups=0)
    assert admin.config.username == "admin"
    assert admin.config.password == ADMIN_PASSWORD  # percent-decoded


def test_a_wrong_password_fails_at_from_url_and_is_never_shown(
    auth_node: LocalCluster,
    admin: Any,
    connect: Callable[..., Any],
    caplog: pytest.LogCaptureFixture,
    transport_kind: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as refused:
        connect(url_of(auth_node.url, "admin", WRONG_PASSWORD), connect_timeout=90)
    assert time.monotonic() - started < 45, "a 401 must not be retried until connect_timeout"
    assert "401" in str(refused.value)
    assert_no_secret("".join(traceback.format_exception(refused.value)), "the traceback")
    # A working transport does not show its password either, nor do its logs.
    admin.publish("g", 1)
    admin.ack(admin.claim("w", visibility=30))
    for where, text in {
        "repr(transport)": repr(admin),
        "repr(config)": repr(admin.config),
        "str(config)": str(admin.config),
        "repr(connection)": repr(admin.connection),
    }.items():
        assert_no_secret(text, where)
    if transport_kind == "requests":  # raftflow's own client logs nothing
        assert caplog.records, "expected the HTTP library to log at DEBUG"
    assert_no_secret(caplog.text, "the log records")
    for record in caplog.records:
        assert_no_secret(record.getMessage(), f"log record {record.name}")


def test_an_unreachable_cluster_error_does_not_show_the_password(
    connect: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    (port,) = pick_free_ports(1)
    with pytest.raises(UnavailableError) as unavailable:
        connect(url_of(f"http://127.0.0.1:{port}", "admin", ADMIN_PASSWORD), connect_timeout=0.5)
    assert f"127.0.0.1:{port}" in str(unavailable.value)
    assert_no_secret("".join(traceback.format_exception(unavailable.value)), "the traceback")
    assert_no_secret(caplog.text, "the log records")


def test_a_read_only_user_can_connect_and_read_but_not_publish_or_claim(
    auth_node: LocalCluster, admin: Any, connect: Callable[..., Any]
) -> None:
    admin.publish("g", 1)
    reader_url = url_of(auth_node.url, "reader", READER_PASSWORD)
    # The schema is up to date: checking its version is a read, which a reader may do.
    reader = connect(reader_url)
    assert reader.stats() == QueueStats(messages=1, leased=0, parked=0, groups=1)
    assert reader.claimable() is True
    for label, call in {
        "publish": lambda: reader.publish("g", 2),
        "claim": lambda: reader.claim("w", visibility=30),
        "claim_many": lambda: reader.claim_many("w", visibility=30, limit=5),
    }.items():
        with pytest.raises(AuthenticationError, match="permission") as refused:
            call()
        assert_no_secret(str(refused.value), label)
    # Nothing was written: the message is still there, never claimed.
    lease = admin.claim("w", visibility=30)
    assert (lease.event, lease.attempts) == (1, 1)
    admin.ack(lease)
    assert reader.stats() == QueueStats(messages=0, leased=0, parked=0, groups=0)
