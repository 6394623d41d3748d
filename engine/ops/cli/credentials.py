"""The rqlite credentials of a command: from its URL, or -- to keep the password out of
the command line, the process list and the shell history -- from ``--password-file``
(``RAFTFLOW_PASSWORD_FILE``) or ``RAFTFLOW_PASSWORD``, the user from the URL
(``http://USER@host:4001``) or ``RAFTFLOW_USERNAME``. Never printed."""

from __future__ import annotations

import os
from pathlib import Path

import click
from raftflow.transports.rqlite.urls import parse


def read_secret(path: str, option: str) -> str:
    """The first line of ``path`` (a mounted secret, a systemd credential), without its
    line end; a usage error naming ``option`` that never quotes the file's content."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise click.UsageError(f"{option} {path}: {reason}") from None
    return text.splitlines()[0] if text else ""


def credential_options(url: str, password_file: str | None) -> dict[str, str]:
    """``username``/``password`` options for connecting to the rqlite ``url``: none when
    the URL carries its own (and no file is given)."""
    parsed = parse(url.split(";", 1)[0])  # sharded: every cluster takes the same options
    if password_file is None:
        if parsed.username is not None:
            return {}
        username = os.environ.get("RAFTFLOW_USERNAME")
        if not username:
            return {}
        return {"username": username, "password": os.environ.get("RAFTFLOW_PASSWORD", "")}
    if parsed.password:
        raise click.UsageError("the URL has a password already: drop it or --password-file")
    username = parsed.username or os.environ.get("RAFTFLOW_USERNAME")
    if not username:
        raise click.UsageError(
            "--password-file needs a user: http://USER@host:4001 or RAFTFLOW_USERNAME"
        )
    return {"username": username, "password": read_secret(password_file, "--password-file")}
