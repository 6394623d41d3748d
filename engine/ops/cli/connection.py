"""The options every connecting command takes (``--url``, TLS, timeouts, credentials), as
a :class:`Connection` that opens the Engine.

Environment variables are read at the edge (the commands' options, here and in
:mod:`.credentials`) and nowhere else: ``RAFTFLOW_URL`` (the default ``--url``),
``RAFTFLOW_USERNAME`` / ``RAFTFLOW_PASSWORD`` / ``RAFTFLOW_PASSWORD_FILE`` (credentials
when the URL carries none), ``RAFTFLOW_APP`` (the default ``--app``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
from raftflow.engine.app import Engine
from raftflow.engine.ops.cli.credentials import credential_options
from raftflow.transports.rqlite.urls import masked

F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class Connection:
    """Where and how to connect: the options every connecting command takes."""

    url: str | None
    ca_file: str | None = None
    insecure: bool = False
    timeout: float | None = None
    retry_timeout: float | None = None
    connect_timeout: float | None = None
    password_file: str | None = None

    def __repr__(self) -> str:
        return f"Connection(url={masked(self.url or '')!r})"

    def require_url(self) -> str:
        if not self.url:
            raise click.UsageError("no database: pass --url or set RAFTFLOW_URL")
        return self.url

    def options(self) -> dict[str, Any]:
        """Keyword options of ``Engine.connect`` / ``open_database`` (none for SQLite)."""
        url = self.require_url()
        if url.startswith("sqlite:"):
            return {}
        options: dict[str, Any] = {}
        for name in ("timeout", "retry_timeout", "connect_timeout"):
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        if self.ca_file:
            options["verify"] = self.ca_file
        elif self.insecure:
            options["verify"] = False
        options.update(credential_options(url, self.password_file))
        return options

    def engine(self, engine: Engine | None = None) -> Engine:
        """``engine`` (an app's) or a bare one, connected to this URL now."""
        engine = engine if engine is not None else Engine()
        engine.connect(self.require_url(), **self.options())
        return engine


def connection_options(fn: F) -> F:
    """``--url``, ``--ca-file``, ``--insecure`` and the timeouts, as ``conn``."""
    return _connection_options(fn, waits=False)


def waiting_connection_options(fn: F) -> F:
    """The same for commands that wait (``result``, ``start --wait``): their
    ``--timeout`` is the wait's, the HTTP one is ``--http-timeout`` only."""
    return _connection_options(fn, waits=True)


def _connection_options(fn: F, *, waits: bool) -> F:

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["conn"] = Connection(
            url=kwargs.pop("url"),
            ca_file=kwargs.pop("ca_file"),
            insecure=kwargs.pop("insecure"),
            timeout=kwargs.pop("http_timeout"),
            retry_timeout=kwargs.pop("retry_timeout"),
            connect_timeout=kwargs.pop("connect_timeout"),
            password_file=kwargs.pop("password_file"),
        )
        return fn(*args, **kwargs)

    options = [
        click.option(
            "--url",
            envvar="RAFTFLOW_URL",
            show_envvar=True,
            metavar="URL",
            help="http(s)://[user:pass@]host:4001[,host:4003...] or sqlite:///file.db; a "
            "sharded deployment's clusters ';'-separated, the catalog's first. Credentials "
            "may also come from RAFTFLOW_USERNAME / RAFTFLOW_PASSWORD or --password-file; "
            "they are never printed.",
        ),
        click.option(
            "--password-file",
            envvar="RAFTFLOW_PASSWORD_FILE",
            show_envvar=True,
            type=click.Path(dir_okay=False),
            help="Read rqlite's password from this file (its first line), the user from "
            "the URL (http://USER@host:4001) or RAFTFLOW_USERNAME: no password in ps.",
        ),
        click.option("--ca-file", type=click.Path(dir_okay=False), help="CA bundle for HTTPS."),
        click.option("--insecure", is_flag=True, help="Do not verify rqlite's certificate."),
        click.option(
            *(("--http-timeout",) if waits else ("--timeout", "--http-timeout")),
            "http_timeout",
            type=float,
            metavar="S",
            help="One HTTP attempt (10 s).",
        ),
        click.option(
            "--retry-timeout",
            type=float,
            metavar="S",
            help="Retries of one request across nodes and leader changes (15 s).",
        ),
        click.option(
            "--connect-timeout",
            type=float,
            metavar="S",
            help="How long to wait for a leader when connecting (30 s).",
        ),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]
