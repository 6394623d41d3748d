"""Commands the suite starts with the session, on the CPU its tests leave idle.

Most of the suite waits (on Raft, on leases running out, on processes starting), while three
of its jobs only compute and time nothing: the simulator's 2,000 seeds (tests/sim), its
check of every planted bug and fence removal (``--mutation-check``, tests/sim/table.py),
and the build of the wheel, the sdist and a virtualenv with the wheel installed
(tests/packaging).
When their tests are collected, their commands start at the beginning of the session under
``SCHED_IDLE`` (the kernel gives them a core only when no other process wants one; ``nice
19`` where that policy is missing). Each test, later, waits for what is left and checks the
output: the commands and the checks are the same as in the foreground; only when they run
changes. ``RAFTFLOW_BACKGROUND=0`` runs them in their tests.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The session's background jobs by name, kept in the pytest config's stash.
JOBS = pytest.StashKey[dict[str, "Job"]]()


def enabled() -> bool:
    return os.environ.get("RAFTFLOW_BACKGROUND", "1") != "0"


def lowest_priority() -> None:
    """This process (and those it forks) runs only when a core would otherwise idle."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


@dataclass
class Job:
    """One command (a process group), its output in a file, its scratch folder."""

    command: list[str]
    process: subprocess.Popen[str]
    output: IO[str]
    folder: Path
    started: float = field(default_factory=time.perf_counter)

    @classmethod
    def start(cls, module: str, *args: str, idle: bool) -> Job:
        """``python -m module args...``; ``{folder}`` in an argument is the job's folder."""
        folder = Path(tempfile.mkdtemp(prefix="raftflow-job-"))
        command = [sys.executable, "-m", module, *(a.format(folder=folder) for a in args)]
        if idle:
            command.append("--idle")
        output = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by stop())
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # so that stop() reaches the processes it starts too
        )
        return cls(command, process, output, folder)

    def wait(self, timeout: float) -> tuple[int, str]:
        """Its exit status and output; stops it (and raises) after ``timeout`` seconds."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        self.output.seek(0)
        return code, self.output.read()

    def stop(self) -> None:
        """Kill it and what it started, if still running, and remove its folder."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.output.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _seeds() -> tuple[str, ...]:
    from tests.sim.test_sim import FIRST, JOBS, SEEDS

    return ("--seeds", str(SEEDS), "--first", str(FIRST), "--jobs", str(JOBS))


def _mutations() -> tuple[str, ...]:
    from tests.sim.test_sim import JOBS

    return ("--mutation-check", "--jobs", str(JOBS))


#: name: (the test whose collection starts it, its module, its arguments)
COMMANDS = {
    "seeds": ("tests/sim/test_sim.py::test_seeds", "tests.sim", _seeds),
    "mutations": (
        "tests/sim/test_fences.py::test_every_mutation_is_caught_first_by_its_recorded_seed",
        "tests.sim",
        _mutations,
    ),
    "packages": ("tests/packaging/test_wheel.py::", "tests.packaging.build", lambda: ("{folder}",)),
}


def job(name: str, request: pytest.FixtureRequest) -> Job:
    """The session's job ``name``, or (not started with the session) the same command now,
    in the foreground."""
    running = request.config.stash.get(JOBS, {})
    if name in running:
        return running[name]
    _, module, args = COMMANDS[name]
    started = Job.start(module, *args(), idle=False)
    request.addfinalizer(started.stop)
    return started


def outcome(name: str, label: str, request: pytest.FixtureRequest) -> tuple[int, str, str]:
    """Wait (up to 1,100 s) for the session's job ``name``: its exit status, output and
    last line, the line printed with how long the job ran and the test waited."""
    run = job(name, request)
    waited = time.perf_counter()
    code, output = run.wait(timeout=1100)
    done = time.perf_counter()
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    print(
        f"\n{label}: {summary} (started {done - run.started:.1f}s ago, "
        f"this test waited {done - waited:.1f}s for it)"
    )
    return code, output, summary


def start_for(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Start the jobs of the tests about to run."""
    if not enabled():
        return
    jobs = config.stash.setdefault(JOBS, {})
    for name, (test, module, args) in COMMANDS.items():
        if any(item.nodeid.startswith(test) for item in items):
            jobs[name] = Job.start(module, *args(), idle=True)


def stop_all(config: pytest.Config) -> None:
    """At the session's end: no job outlives it (an interrupted session too)."""
    for started in config.stash.get(JOBS, {}).values():
        started.stop()
