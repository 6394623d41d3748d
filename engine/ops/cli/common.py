"""What every command shares: the connection options, output (tables or ``--json``),
exit codes, progress on a terminal, and the translation of errors into exit codes.

Environment variables are read at the edge (here and in :mod:`.credentials`) and nowhere
else: ``RAFTFLOW_URL`` (the default ``--url``), ``RAFTFLOW_USERNAME`` / ``RAFTFLOW_PASSWORD``
/ ``RAFTFLOW_PASSWORD_FILE`` (credentials when the URL carries none), ``RAFTFLOW_APP``
(the default ``--app``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import importlib
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import click
from raftflow.engine.app import Engine
from raftflow.engine.ops.cli.credentials import credential_options
from raftflow.stores.records import ErrorInfo, ExecutionRecord, StepRecord
from raftflow.transports.rqlite.urls import masked

from raftflow.errors import (
    ConfigurationError,
    InvalidArgumentError,
    RaftflowError,
    ResultTimeoutError,
    SchemaError,
    UnavailableError,
)

F = TypeVar("F", bound=Callable[..., Any])


class Exit(enum.IntEnum):
    """The exit codes of every command (``raftflow --help`` lists them)."""

    OK = 0
    FAILED = 1  # the execution failed or was cancelled; or the operation was refused
    USAGE = 2  # bad arguments or options
    UNAVAILABLE = 3  # the cluster could not be reached (no node, no leader) in time
    TIMEOUT = 4  # still running when --timeout ran out


EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 the execution failed or was cancelled, or the request was "
    "refused (not found, wrong credentials...); 2 usage error; 3 the cluster is "
    "unavailable; 4 still running when --timeout ran out."
)


class CommandFailed(Exception):
    """A command's own failure, with its exit code (the message goes to stderr)."""

    def __init__(self, message: str, code: int = Exit.FAILED) -> None:
        super().__init__(message)
        self.code = code


def exit_code_of(exc: RaftflowError) -> int:
    if isinstance(exc, UnavailableError):
        return Exit.UNAVAILABLE
    if isinstance(exc, ResultTimeoutError):
        return Exit.TIMEOUT
    if isinstance(exc, InvalidArgumentError):
        return Exit.USAGE
    if isinstance(exc, ConfigurationError) and not isinstance(
        exc, (SchemaError, FileNotFoundError)
    ):
        return Exit.USAGE
    return Exit.FAILED


# -- connecting ---------------------------------------------------------------------------


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
            help="http(s)://[user:pass@]host:4001[,host:4003...] or sqlite:///file.db. "
            "Credentials may also come from RAFTFLOW_USERNAME / RAFTFLOW_PASSWORD or "
            "--password-file; they are never printed.",
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


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")(fn)


def load_engine(spec: str) -> Engine:
    """``module:attribute`` (``raftflow.engine.ops.demo:engine``) to the Engine it names;
    :class:`ConfigurationError` in one line (exit 2) for anything else, including a
    module that cannot be imported (the line says where its import failed)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"app {spec!r}: expected MODULE:ATTRIBUTE, e.g. myapp:engine")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{module_name}.".startswith(f"{exc.name}."):
            raise ConfigurationError(
                f"app {spec!r}: no module named {exc.name!r} (run the command from the app's "
                "directory, or add it to PYTHONPATH)"
            ) from None
        raise ConfigurationError(f"app {spec!r}: importing it failed: {_failure(exc)}") from None
    except Exception as exc:  # the app's own code failed on import
        raise ConfigurationError(f"app {spec!r}: importing it failed: {_failure(exc)}") from None
    engine = getattr(module, attribute, None)
    if not isinstance(engine, Engine):
        found = "nothing" if engine is None else f"a {type(engine).__name__}"
        raise ConfigurationError(
            f"app {spec!r}: {module_name}.{attribute} is {found}, not an Engine"
        )
    return engine


def _failure(exc: BaseException) -> str:
    """An exception in one line, with where it was raised (the innermost frame)."""
    if isinstance(exc, SyntaxError):  # raised by the compiler: no frame of the app's file
        where = f" ({exc.filename}, line {exc.lineno})"
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    message = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {message}{where}"


# -- time ---------------------------------------------------------------------------------

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str | None, *, now: float | None = None) -> float:
    """``--since``: a duration back from now (``30s``, ``15m``, ``2h``, ``7d``), an ISO
    date or time (``2026-05-01``, ``2026-05-01T12:00``, local time unless it says), or
    epoch seconds; None means from the beginning (0)."""
    if text is None or not text.strip():
        return 0.0
    now = time.time() if now is None else now
    match = _DURATION.match(text)
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise click.BadParameter(
            f"{text!r}: use a duration (15m, 2h, 7d), an ISO date/time or epoch seconds",
            param_hint="--since",
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return moment.timestamp()


def fmt_time(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


# -- output -------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {
            str(k.value if isinstance(k, enum.Enum) else k): to_jsonable(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    click.echo(json.dumps(to_jsonable(value), indent=2, sort_keys=False, default=str))


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain aligned table (the last column is not padded)."""
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [c.ljust(w) for c, w in zip(row[:-1], widths[:-1])] + [row[-1]]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def error_line(error: ErrorInfo | None) -> str:
    if error is None:
        return ""
    return f"{error.type}: {error.message}".splitlines()[0][:120]


def execution_row(record: ExecutionRecord, now: float | None = None) -> list[Any]:
    """A row of ``list``: TOOK is the whole run of a finished execution, the time so far
    of one that is not (``now``: the cluster's clock; without it, ``-``)."""
    if record.status.is_final and record.completed_at is not None:
        took = fmt_seconds(record.completed_at - record.created_at)
    else:
        took = _so_far(record.created_at, now)
    return [
        record.id,
        record.workflow,
        record.status.value
        + (" (cancel asked)" if record.cancel_reason and not record.status.is_final else ""),
        record.steps_done,
        fmt_time(record.created_at),
        took,
    ]


def _so_far(since: float, now: float | None) -> str:
    return "-" if now is None else f"{fmt_seconds(max(0.0, now - since))} so far"


EXECUTION_HEADERS = ["ID", "WORKFLOW", "STATUS", "STEPS", "CREATED", "TOOK"]


def step_row(step: StepRecord, now: float | None = None, live: bool = False) -> list[Any]:
    """A row of ``steps``. A call still waiting while its execution runs (``live``) --
    a sleep before its wake time (recorded at its start), a recv, a retry -- shows what it
    waits for and its time so far; a finished sleep, how long it slept."""
    status, took = step.status, fmt_seconds(step.ended_at - step.started_at)
    asleep = step.kind == "sleep" and step.wake_at is not None
    pending = not step.done or (asleep and now is not None and (step.wake_at or 0) > now)
    if live and pending:
        if step.wake_at is not None:
            kind = "retrying at" if step.status == "retrying" else "waiting until"
            status = f"{kind} {fmt_time(step.wake_at)}"
        took = _so_far(step.started_at, now)
    elif asleep:
        took = fmt_seconds((step.wake_at or step.started_at) - step.started_at)
    return [
        step.idx,
        step.kind,
        step.name,
        status,
        step.attempts,
        fmt_time(step.started_at),
        took,
        step.worker_id,
        error_line(step.error),
    ]


STEP_HEADERS = ["#", "KIND", "NAME", "STATUS", "ATTEMPTS", "STARTED", "TOOK", "WORKER", "ERROR"]


class Progress:
    """One status line on a terminal (stderr), rewritten in place; silent when stderr is
    not a terminal (piped, in scripts and tests)."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._width = 0

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        line = text[:200]
        sys.stderr.write("\r" + line.ljust(self._width))
        sys.stderr.flush()
        self._width = len(line)

    def done(self) -> None:
        if self.enabled and self._width:
            sys.stderr.write("\r" + " " * self._width + "\r")
            sys.stderr.flush()
            self._width = 0


@contextmanager
def progress() -> Iterator[Progress]:
    bar = Progress()
    try:
        yield bar
    finally:
        bar.done()
