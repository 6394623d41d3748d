"""HTTPS to rqlite with its -http-cert/-http-key: a throwaway CA made by trustme.

A verified connection works (sync on httpx and requests, async); a certificate that is not
trusted is refused by default, at once and with a message that says what to do."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from raftflow.transports.rqlite import AsyncRqliteTransport, RqliteTransport
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine
from raftflow.errors import ConfigurationError
from tests.support import LoopThread, SyncView


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_node(
    ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LocalCluster, Path]]:
    folder = tmp_path_factory.mktemp("tls")
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path, ca_path = folder / "server.pem", folder / "server.key", folder / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    for blob in cert.cert_chain_pems[1:]:
        blob.write_to_path(str(cert_path), append=True)
    cert.private_key_pem.write_to_path(str(key_path))
    ca.cert_pem.write_to_path(str(ca_path))
    with LocalCluster(
        1, http_cert=cert_path, http_key=key_path, probe_verify=str(ca_path)
    ) as cluster:
        yield cluster, ca_path


@pytest.mark.parametrize("kind", ["raftflow", "httpx", "requests", "async", "async-httpx"])
def test_verified_https_works(
    tls_node: tuple[LocalCluster, Path], kind: str, loop_thread: LoopThread
) -> None:
    cluster, ca_path = tls_node
    assert cluster.url.startswith("https://")
    transport: Any
    if kind.startswith("async"):
        http = "httpx" if kind == "async-httpx" else "raftflow"
        twin = loop_thread.run(
            AsyncRqliteTransport.from_url(cluster.url, verify=str(ca_path), http=http)
        )
        transport = SyncView(twin, loop_thread)
    else:
        transport = RqliteTransport.from_url(cluster.url, verify=str(ca_path), http=kind)
    try:
        transport.publish(f"tls-{kind}", {"secure": True})
        lease = transport.claim("w", 30)
        assert lease is not None and lease.event == {"secure": True}
        transport.ack(lease)
    finally:
        transport.close()


@pytest.mark.parametrize("kind", ["raftflow", "httpx", "requests"])
def test_untrusted_certificate_is_refused_at_once(
    tls_node: tuple[LocalCluster, Path], kind: str
) -> None:
    cluster, _ = tls_node
    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="not trusted"):  # system CAs only
        RqliteTransport.from_url(cluster.url, http=kind, retry_timeout=90, connect_timeout=90)
    assert time.monotonic() - started < 45  # at once, not after the retry budget


def test_certificate_of_another_ca_is_refused(
    tls_node: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    cluster, _ = tls_node
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))
    with pytest.raises(ConfigurationError, match="not trusted"):
        RqliteTransport.from_url(cluster.url, verify=str(other))


def test_verify_false_is_possible_and_explicit(tls_node: tuple[LocalCluster, Path]) -> None:
    cluster, _ = tls_node
    transport = RqliteTransport.from_url(cluster.url, verify=False)
    transport.close()


def test_engine_over_https(tls_node: tuple[LocalCluster, Path]) -> None:
    cluster, ca_path = tls_node
    with Engine.from_url(cluster.url, verify=str(ca_path)) as engine:

        @engine.workflow
        def hello(name: str) -> str:
            return f"hello {name}"

        handle = engine.start(hello, "tls")
        with engine.running_worker():
            assert handle.result(timeout=30) == "hello tls"
