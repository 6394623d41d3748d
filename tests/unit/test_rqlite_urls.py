"""rqlite URLs whose password holds ``#``, ``/``, ``?`` or ``@`` unencoded: parsed into the
right nodes and credentials, and never echoed by a repr or an error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from raftflow.engine.ops.cli.connection import Connection
from raftflow.engine.shards.deployment import shard_urls
from raftflow.transports.rqlite.protocol import RqliteConfig
from raftflow.transports.rqlite.urls import masked

from raftflow.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
SECRETS = ["s3cr#t", "s3/cr3t", "s3?cr=t", "p@ss#w/rd?x", "pa:ss"]


@pytest.mark.parametrize("secret", SECRETS)
def test_an_unencoded_password_is_parsed_whole_and_never_shown(secret: str) -> None:
    config = RqliteConfig.from_url(f"http://admin:{secret}@h1:4001,h2:4003")
    assert config.nodes == ("http://h1:4001", "http://h2:4003")
    assert config.auth == ("admin", secret)
    assert secret not in repr(config) and secret not in repr(config.nodes)


def test_the_userinfo_ends_at_the_last_at_sign_and_is_percent_decoded() -> None:
    config = RqliteConfig.from_url("https://al%40ice:p@ss%23w@h1:4001/")
    assert config.nodes == ("https://h1:4001",)
    assert config.auth == ("al@ice", "p@ss#w")
    assert RqliteConfig.from_url("http://[::1]:4001").nodes == ("http://[::1]:4001",)


@pytest.mark.parametrize(
    "url",
    [
        "http://admin:s3cr#t@",  # no host
        "http://admin:s3cr#t@h1:4001,,h2:4003",  # an empty host
        "http://admin:s3cr#t@bad host:4001",
        "http://admin:s3cr#t@h1:99999",
        "http://admin:s3cr#t@h1:port",
        "admin:s3cr#t@h1:4001",  # no scheme
    ],
)
def test_a_bad_url_is_a_clear_error_that_masks_the_credentials(url: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        RqliteConfig.from_url(url)
    message = str(caught.value)
    assert "s3cr" not in message and "admin" not in message
    assert "rqlite URL" in message or "unsupported" in message


def test_credentials_from_the_environment_only_when_the_url_has_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RAFTFLOW_USERNAME", "env-user")
    monkeypatch.setenv("RAFTFLOW_PASSWORD", "env-secret")
    own = Connection("http://admin:a/b@h1:4001")
    assert "username" not in own.options() and "a/b" not in repr(own)
    options = Connection("http://h1:4001/").options()
    assert (options["username"], options["password"]) == ("env-user", "env-secret")


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://admin:s3cr#t@127.0.0.1:9", 3),  # parsed; nothing listens: unavailable
        ("http://admin:s3cr#t@127.0.0.1:port", 2),  # not a URL: a usage error
        # a sharded deployment's, a ';' in the first password: each cluster parsed whole
        ("http://admin:s3cr;t@127.0.0.1:9;http://admin:s3cr#t@127.0.0.1:9", 3),
    ],
)
def test_the_cli_never_prints_a_password_from_the_url(url: str, code: int) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "raftflow", "list", "--url", url, "--connect-timeout", "0.5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    output = result.stdout + result.stderr
    assert result.returncode == code, output
    assert "s3cr" not in output and "Traceback" not in output


def test_a_string_may_list_its_nodes_as_whole_urls() -> None:
    one = RqliteConfig.from_url("http://u:p%2C@127.0.0.1:1,127.0.0.1:2")
    listed = RqliteConfig.from_url("http://u:p%2C@127.0.0.1:1,http://127.0.0.1:2")
    assert one.nodes == listed.nodes == ("http://127.0.0.1:1", "http://127.0.0.1:2")
    assert listed.username == "u" and listed.password == "p,"
    # a comma inside the password never starts a node
    (node,) = RqliteConfig.from_url("http://u:a,http://b@127.0.0.1:1").nodes
    assert node == "http://127.0.0.1:1"


# -- the URL of a sharded deployment: its clusters ';'-separated --------------------------


def test_each_cluster_of_a_sharded_url_is_masked_and_none_is_dropped() -> None:
    from raftflow.transports.rqlite.urls import split_clusters

    url = "http://ops:s3cr#t@a1:4001,a2:4001;http://b1:4001;https://ops:p;w@c1:4001"
    assert masked(url) == "http://***@a1:4001,a2:4001;http://b1:4001;https://***@c1:4001"
    assert split_clusters(url)[2] == "https://ops:p;w@c1:4001"  # a ';' in a password
    assert split_clusters("sqlite:///a;b.db") == ["sqlite:///a;b.db"]  # or in a file name


def test_a_semicolon_in_a_password_does_not_split_one_cluster_and_errors_mask_it() -> None:
    assert shard_urls("http://ops:p;w@h1:4001") == ["http://ops:p;w@h1:4001"]
    assert shard_urls(" http://h1:4001 ; http://h2:4001 ") == ["http://h1:4001", "http://h2:4001"]
    with pytest.raises(ConfigurationError) as caught:
        shard_urls("http://ops:s3cr#t@h1:4001;;http://h2:4001")
    assert "empty cluster URL" in str(caught.value) and "s3cr" not in str(caught.value)


def test_the_credentials_of_a_sharded_url_apply_to_every_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert Connection("http://u:p@h1:4001;http://u:q@h2:4001").options() == {}
    monkeypatch.setenv("RAFTFLOW_USERNAME", "env-user")
    monkeypatch.setenv("RAFTFLOW_PASSWORD", "env-secret")
    options = Connection("http://h1:4001;http://h2:4001").options()
    assert (options["username"], options["password"]) == ("env-user", "env-secret")
    with pytest.raises(click.UsageError, match="some clusters of the URL carry credentials"):
        Connection("http://u:p@h1:4001;http://h2:4001").options()  # which would win?
    secret = tmp_path / "password"
    secret.write_text("from-file\n")
    options = Connection("http://ops@h1:4001;http://h2:4001", password_file=str(secret)).options()
    assert (options["username"], options["password"]) == ("ops", "from-file")
    with pytest.raises(click.UsageError, match="different users"):
        Connection("http://a@h1:4001;http://b@h2:4001", password_file=str(secret)).options()
    assert "env-secret" not in repr(Connection("http://u:s3cr#t@h1:4001;http://h2:4001"))
    assert "s3cr" not in repr(Connection("http://h1:4001;http://u:s3cr#t@h2:4001"))
