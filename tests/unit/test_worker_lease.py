"""The lease length is checked where a worker is set up: WorkerOptions (``engine.worker``,
``run_worker``, ``running_worker``) and ``raftflow worker --lease`` (alias ``--visibility``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from raftflow import Engine, WorkerOptions
from raftflow.errors import InvalidArgumentError


@pytest.mark.parametrize("seconds", [0.5, 0.99])
def test_a_lease_too_short_to_renew_is_refused(seconds: float) -> None:
    with pytest.raises(InvalidArgumentError, match=r"at least 1 s.*heartbeat"):
        WorkerOptions(visibility=seconds)


@pytest.mark.parametrize("seconds", [0, -1.0, float("nan"), float("inf"), True, "30", None])
def test_a_lease_that_is_not_a_positive_finite_number_is_refused(seconds: object) -> None:
    with pytest.raises(InvalidArgumentError, match="visibility"):
        WorkerOptions(visibility=seconds)  # type: ignore[arg-type]


def test_the_shortest_lease_is_accepted() -> None:
    assert WorkerOptions(visibility=1.0).visibility == 1.0
    assert WorkerOptions(visibility=1).visibility == 1


def test_a_worker_with_a_bad_lease_never_starts(tmp_path: Path) -> None:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'lease.db'}")
    try:
        with (
            pytest.raises(InvalidArgumentError, match="at least 1 s"),
            engine.running_worker(visibility=0.25),
        ):
            pytest.fail("the worker started")
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--lease", "0.5", "at least 1 s"),
        ("--visibility", "inf", "positive and finite"),
        ("--lease", "soon", "not a valid float"),
    ],
)
def test_the_command_line_refuses_a_bad_lease_before_connecting(
    option: str, value: str, message: str
) -> None:
    # No app module is imported, no URL reached: the option is checked first.
    done = subprocess.run(
        [sys.executable, "-m", "raftflow", "worker", "nowhere:engine", option, value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done
    assert "Invalid value for '--lease' / '--visibility'" in done.stderr
    assert message in done.stderr, done.stderr
