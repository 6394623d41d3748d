"""rqlite URLs whose password holds ``#``, ``/``, ``?`` or ``@`` unencoded: parsed into the
right nodes and credentials, and never echoed by a repr or an error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from raftflow.engine.ops.cli.connection import Connection
from raftflow.transports.rqlite.protocol import RqliteConfig

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
