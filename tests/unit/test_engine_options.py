"""Engine-wide options reach every place they govern (found missing in the first draft)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from raftflow import Engine
from raftflow.errors import (
    ConfigurationError,
    PayloadTooLargeError,
    WorkflowFailedError,
)


def test_max_payload_bytes_governs_the_input_of_start_both_ways() -> None:
    roomy = Engine.from_url("sqlite://", max_payload_bytes=3_000_000)
    tight = Engine(url="sqlite://", max_payload_bytes=1_000)
    try:
        for engine in (roomy, tight):

            @engine.workflow
            def size(data: str) -> int:
                return len(data)

        # Over the 1 MiB default, under this engine's limit: accepted and run.
        handle = roomy.start("size", "x" * 2_000_000)
        with roomy.running_worker():
            assert handle.result(timeout=20) == 2_000_000
        with pytest.raises(PayloadTooLargeError, match="over the limit of 1000 bytes"):
            tight.start("size", "x" * 2_000)
        assert tight.list() == []
    finally:
        roomy.close()
        tight.close()


def test_max_payload_bytes_governs_step_results() -> None:
    engine = Engine.from_url("sqlite://", max_payload_bytes=1_000)
    try:

        @engine.step
        def big() -> str:
            return "y" * 5_000

        @engine.workflow
        def wf() -> str:
            return big()

        handle = engine.start(wf)
        with engine.running_worker(), pytest.raises(WorkflowFailedError, match="1000 bytes"):
            handle.result(timeout=20)
        assert handle.steps()[0].succeeded is False
    finally:
        engine.close()


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_max_payload_bytes_must_be_a_positive_int(value: object) -> None:
    with pytest.raises(ConfigurationError, match="max_payload_bytes"):
        Engine(max_payload_bytes=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["worker", "executions"])
def test_every_connecting_command_takes_the_connection_options(command: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "raftflow", command, "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for option in ("--url", "--ca-file", "--insecure", "--timeout", "--retry-timeout"):
        assert option in out, (command, option)


def test_connecting_checks_the_schema_in_one_read(tmp_path: object) -> None:

    # Empty: read the version (weakly, then again through the log: it is not the latest),
    # then every migration in one request; then the weak read only.
    for round_trips in (3, 1):
        engine = Engine.from_url(f"sqlite:///{tmp_path}/once.db")
        try:
            assert engine.store.database.connection.round_trips == round_trips
        finally:
            engine.close()
