"""The simulator's 2,000 seeds, run on the CPU the rest of the suite leaves idle.

Most of the suite waits (on Raft, on leases running out, on processes starting) while the
simulator only computes. So when ``test_seeds`` is collected, its command starts at the
beginning of the session under ``SCHED_IDLE`` (the kernel gives it a core only when no
other process wants one; ``nice 19`` where that policy is missing), and the test, near the
end of the session, waits for what is left and checks its output. The seeds, the command
and the checks are the same as in the foreground; only when they run changes.
``RAFTFLOW_SIM_BACKGROUND=0`` runs them in the test itself, as ``make sim`` does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[2]


#: The session's background run, kept in the pytest config's stash.
RUN = pytest.StashKey["SeedRun"]()


def enabled() -> bool:
    return os.environ.get("RAFTFLOW_SIM_BACKGROUND", "1") != "0"


@dataclass
class SeedRun:
    """One run of ``python -m tests.sim`` (a process group), its output in a file."""

    command: list[str]
    process: subprocess.Popen[str]
    output: IO[str]
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None

    @classmethod
    def start(cls, command: list[str]) -> SeedRun:
        output = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed by stop())
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # so that stop() reaches the pool's processes too
        )
        return cls(command, process, output)

    def wait(self, timeout: float) -> tuple[int, str]:
        """Its exit status and output; stops it (and raises) after ``timeout`` seconds."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        if self.ended is None:
            self.ended = time.perf_counter()
        self.output.seek(0)
        return code, self.output.read()

    def stop(self) -> None:
        """Kill it and its pool, if still running."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.output.close()


def seeds_command(seeds: int, first: int, jobs: int, *, idle: bool) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tests.sim",
        "--seeds",
        str(seeds),
        "--first",
        str(first),
        "--jobs",
        str(jobs),
        *(["--idle"] if idle else []),
    ]


def start_for(config: pytest.Config, seeds: int, first: int, jobs: int) -> None:
    """Start the seeds now (``test_seeds`` is among the tests about to run)."""
    if not enabled():
        return
    config.stash[RUN] = SeedRun.start(seeds_command(seeds, first, jobs, idle=True))


def stop_for(config: pytest.Config) -> None:
    """At the session's end: no seed process outlives it (an interrupted session too)."""
    run = config.stash.get(RUN, None)
    if run is not None:
        run.stop()
