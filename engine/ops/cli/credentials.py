"""The rqlite credentials of a command: from its URL, or -- to keep the password out of
the command line, the process list and the shell history -- from ``--password-file``
(``RAFTFLOW_PASSWORD_FILE``) or ``RAFTFLOW_PASSWORD``, the user from the URL
(``http://USER@host:4001``) or ``RAFTFLOW_USERNAME``. Never printed."""

from __future__ import annotations

import os
from pathlib import Path

import click
from raftflow.transports.rqlite.urls import parse, split_clusters


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
    the URL carries its own (and no file is given). The options apply to every cluster of
    a sharded deployment's URL (``;``-separated): each cluster has its credentials in the
    URL, or none has."""
    parsed = [parse(part) for part in split_clusters(url) if not part.startswith("sqlite:")]
    own = [cluster.username is not None for cluster in parsed]
    if password_file is None:
        username = os.environ.get("RAFTFLOW_USERNAME")
        if all(own) or not username:
            return {}
        if any(own):
            raise click.UsageError(
                "some clusters of the URL carry credentials, others not: give each cluster "
                "its own in the URL, or none (RAFTFLOW_USERNAME, --password-file)"
            )
        return {"username": username, "password": os.environ.get("RAFTFLOW_PASSWORD", "")}
    if any(cluster.password for cluster in parsed):
        raise click.UsageError("the URL has a password already: drop it or --password-file")
    users = {cluster.username for cluster in parsed if cluster.username is not None}
    if len(users) > 1:
        raise click.UsageError(
            "the clusters of the URL name different users: --password-file is one user's"
        )
    username = next(iter(users), None) or os.environ.get("RAFTFLOW_USERNAME")
    if not username:
        raise click.UsageError(
            "--password-file needs a user: http://USER@host:4001 or RAFTFLOW_USERNAME"
        )
    return {"username": username, "password": read_secret(password_file, "--password-file")}
