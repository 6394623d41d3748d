"""The CLI in-process (no server): help texts, usage errors, exit codes, ``--since``,
progress on a terminal. tests/integration/test_cli.py runs it as a subprocess on rqlite."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import pty
import time
from pathlib import Path

import click
import pytest
from raftflow.engine.ops.cli import cli, main
from raftflow.engine.ops.cli.exits import Exit, exit_code_of
from raftflow.engine.ops.cli.output import Progress
from raftflow.engine.ops.cli.times import parse_since

from raftflow import Engine, WorkflowFailedError
from raftflow.errors import (
    AuthenticationError,
    ConfigurationError,
    ExecutionNotFoundError,
    InvalidArgumentError,
    ResultTimeoutError,
    SchemaOutdatedError,
    UnavailableError,
)
from tests.support import wait_until

APP = "tests.apps.ops:engine"
CONNECTING = [
    "start",
    "result",
    "stream",
    "get",
    "steps",
    "list",
    "cancel",
    "resume",
    "fork",
    "replay",
    "send",
    "queue",
    "workers",
    "schedules",
    "versions",
    "ui",
    "worker",
    "migrate",
    "shards",
    "move-partitions",
]


@pytest.fixture(autouse=True)
def no_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "RAFTFLOW_URL",
        "RAFTFLOW_APP",
        "RAFTFLOW_UI_TOKEN",
        "RAFTFLOW_UI_TOKEN_FILE",
        "RAFTFLOW_PASSWORD_FILE",
    ):
        monkeypatch.delenv(name, raising=False)


def help_of(name: str) -> str:
    command = cli.commands[name]
    with click.Context(command, info_name=name) as context:
        return command.get_help(context)


def test_every_command_has_help_with_an_example() -> None:
    visible = [name for name, c in cli.commands.items() if not c.hidden]
    assert sorted(visible) == sorted(
        [*CONNECTING, "demo", "cluster", "install-rqlite", "hash-password"]
    )
    for name in visible:
        assert "Example:" in help_of(name), name
    for name in CONNECTING:
        text = help_of(name)
        for option in ("--url", "--ca-file", "--insecure", "--retry-timeout", "--connect-timeout"):
            assert option in text, (name, option)
        assert "--http-timeout" in text, name
    assert "schedules" in cli.commands


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cli.db"
    assert main(["list"]) == Exit.USAGE  # no --url and no RAFTFLOW_URL
    assert "RAFTFLOW_URL" in capsys.readouterr().err
    assert main(["list", "--status", "sleepy", "--url", url]) == Exit.USAGE
    # A start by name (without --app) names its queue; an app's workflow has its own.
    assert main(["start", "checkout", "{}", "--queue", "q", "--app", APP, "--url", url]) == 2
    assert main(["start", "checkout", "not json", "--app", APP, "--url", url]) == Exit.USAGE
    assert "not JSON" in capsys.readouterr().err
    assert main(["list", "--since", "last tuesday", "--url", url]) == Exit.USAGE
    assert main(["ui", "--bind", "0.0.0.0:8080", "--url", url]) == Exit.USAGE
    assert "refusing to serve" in capsys.readouterr().err
    assert main(["no-such-command"]) == Exit.USAGE


def test_on_sqlite_a_whole_round(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/round.db"
    order = '{"id": "o1", "amount": 2}'
    assert main(["start", "approval", order, "--app", APP, "--id", "a1", "--url", url]) == 0
    assert capsys.readouterr().out.strip() == "a1"
    assert main(["result", "a1", "--timeout", "0.05", "--url", url]) == Exit.TIMEOUT
    assert main(["send", "a1", '{"ok": true}', "--topic", "review", "--url", url]) == 0
    capsys.readouterr()
    assert main(["cancel", "a1", "--json", "--url", url]) == 0  # no worker ever ran it
    cancel = json.loads(capsys.readouterr().out)
    assert (cancel["status"], cancel["status_now"]) == ("pending", "cancelled")
    assert main(["list", "--json", "--workflow", "approval", "--url", url]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["id"] == "a1" and row["cancel_reason"] == "cancelled"
    assert main(["get", "nope", "--url", url]) == Exit.FAILED


def test_fork_refuses_a_step_past_the_recorded_calls(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/fork.db"
    engine = Engine.from_url(url)

    @engine.step
    def fetch() -> int:
        return 1

    @engine.step
    def boom(x: int) -> None:
        raise RuntimeError(f"boom {x}")

    @engine.workflow
    def job() -> None:
        boom(fetch())

    try:
        handle = engine.start(job, execution_id="job-1")
        with engine.running_worker(), pytest.raises(WorkflowFailedError):
            handle.result(timeout=10)
    finally:
        engine.close()
    capsys.readouterr()
    assert main(["fork", "job-1", "--from-step", "9", "--url", url]) == Exit.USAGE
    err = capsys.readouterr().err
    assert "recorded 2 call(s): from_step must be 0..2, not 9" in err
    assert "Traceback" not in err
    assert main(["fork", "job-1", "--from-step", "1", "--id", "job-1-b", "--url", url]) == 0
    assert "job-1-b: forked from job-1 at call 1" in capsys.readouterr().out


def test_a_sleep_in_progress_and_the_time_so_far_of_a_running_execution(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path}/sleepy.db"
    engine = Engine.from_url(url)

    @engine.step
    def prepare() -> int:
        return 1

    @engine.workflow
    def nap() -> int:
        prepare()
        engine.sleep(3600)
        return 2

    try:
        with engine.running_worker():
            handle = engine.start(nap, execution_id="nap-1")
            wait_until(lambda: [s.kind for s in handle.steps()] == ["step", "sleep"])
            time.sleep(0.05)  # some time so far
            capsys.readouterr()
            assert main(["steps", "nap-1", "--url", url]) == 0
            out = capsys.readouterr().out
            (sleep,) = [line for line in out.splitlines() if " sleep " in line]
            wake = handle.steps()[1].wake_at
            assert wake is not None
            until = dt.datetime.fromtimestamp(wake).strftime("%Y-%m-%d %H:%M:%S")
            assert f"waiting until {until}" in sleep and "so far" in sleep  # not succeeded 0ms
            assert "succeeded" not in sleep
            assert main(["list", "--url", url]) == 0
            (row,) = [line for line in capsys.readouterr().out.splitlines() if "nap-1" in line]
            assert row.split()[2] == "running" and row.endswith("so far")
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("app", "says"),
    [
        ("no_such_module_here:engine", "no module named 'no_such_module_here'"),
        ("broken_app:engine", "importing it failed: NameError: name 'undefined_name' is not"),
        ("typo_app:engine", "importing it failed: SyntaxError"),
        ("good_app:missing", "good_app.missing is nothing, not an Engine"),
        ("good_app:value", "good_app.value is a int, not an Engine"),
        ("good_app", "expected MODULE:ATTRIBUTE"),
    ],
)
def test_a_bad_app_is_one_clear_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    app: str,
    says: str,
) -> None:
    (tmp_path / "broken_app.py").write_text("x = 1\nundefined_name()\n")
    (tmp_path / "typo_app.py").write_text("def f(:\n")
    (tmp_path / "good_app.py").write_text("value = 3\n")
    monkeypatch.chdir(tmp_path)  # where the command looks for the app first
    url = f"sqlite:///{tmp_path}/app.db"
    assert main(["start", "wf", "--app", app, "--url", url]) == Exit.USAGE
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    where = {
        "broken_app:engine": "broken_app.py, line 2)",
        "typo_app:engine": "typo_app.py, line 1)",
    }
    if app in where:  # the app's own file and line
        assert f"({tmp_path}/{where[app]}" in err, err


def test_exit_codes_of_errors() -> None:
    assert exit_code_of(UnavailableError("down")) == Exit.UNAVAILABLE
    assert exit_code_of(ResultTimeoutError("slow")) == Exit.TIMEOUT
    assert exit_code_of(InvalidArgumentError("bad")) == Exit.USAGE
    assert exit_code_of(ConfigurationError("bad url")) == Exit.USAGE
    assert exit_code_of(SchemaOutdatedError("migrate")) == Exit.FAILED
    assert exit_code_of(AuthenticationError("401")) == Exit.FAILED
    assert exit_code_of(ExecutionNotFoundError("nope")) == Exit.FAILED


def test_since_takes_durations_dates_and_epochs() -> None:
    now = 1_000_000.0
    assert parse_since("15m", now=now) == now - 900
    assert parse_since("2h", now=now) == now - 7200
    assert parse_since("7d", now=now) == now - 7 * 86400
    assert parse_since("1234.5", now=now) == 1234.5
    assert parse_since("2026-05-01T00:00:00+00:00") == 1777593600.0
    assert parse_since(None) == 0.0
    with pytest.raises(click.BadParameter):
        parse_since("soon")


def test_progress_shows_on_a_terminal_and_is_quiet_when_piped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    bar = Progress()  # stderr is not a terminal
    bar.update("waiting for x: running")
    bar.done()
    assert piped.getvalue() == ""
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as terminal:
        monkeypatch.setattr("sys.stderr", terminal)
        bar = Progress()
        assert bar.enabled
        bar.update("waiting for x: running, 2 steps")
        bar.done()
    assert b"waiting for x: running, 2 steps" in os.read(leader, 1024)
    os.close(leader)


def test_credentials_come_from_the_url_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from raftflow.engine.ops.cli.connection import Connection

    monkeypatch.setenv("RAFTFLOW_USERNAME", "ops")
    monkeypatch.setenv("RAFTFLOW_PASSWORD", "s3cret")
    options = Connection("http://127.0.0.1:4001", insecure=True, timeout=2.0).options()
    assert options == {"timeout": 2.0, "verify": False, "username": "ops", "password": "s3cret"}
    in_url = Connection("http://me:pw@127.0.0.1:4001").options()
    assert "username" not in in_url  # the URL's own credentials win
    assert Connection("sqlite:///x.db", insecure=True).options() == {}
    assert "s3cret" not in repr(Connection("http://127.0.0.1:4001"))
