"""The deterministic simulator's own tests (see docs/reliability.md).

- ``test_seeds``: ``RAFTFLOW_SIM_SEEDS`` seeds (default 2,000, in ``RAFTFLOW_SIM_JOBS``
  processes, default 2) all pass every invariant; a failure names its seed and the command
  that replays it with a trace.
- the same seed gives the same trace, byte for byte -- in this process and in another one,
  and the replay of a failure is the same run.

Each planted bug and each fence removed is caught by its recorded first seed, and by none
before it: tests/sim/test_fences.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import background
from tests.sim import table
from tests.sim.cli import describe
from tests.sim.sim import run_seed

SEEDS = int(os.environ.get("RAFTFLOW_SIM_SEEDS", "2000"))
FIRST = int(os.environ.get("RAFTFLOW_SIM_FIRST", "0"))
#: Processes running them (the command line's --jobs); CI's machine has 2 cores.
JOBS = int(os.environ.get("RAFTFLOW_SIM_JOBS", "2"))


@pytest.mark.timeout(1200)  # about 2 minutes on 2 idle cores; a shared machine is slower
def test_seeds(request: pytest.FixtureRequest) -> None:
    """``make sim``'s command, in its own process (its pool forks from a process that ran
    nothing): every seed passes every invariant, or the failures say how to replay them.
    In a whole-suite run the command started with the session, on idle CPU
    (tests/background.py); the test waits for what is left of it."""
    code, output, summary = background.outcome("seeds", "sim", request)
    assert code == 0, output[-10000:]
    assert f"{SEEDS} seeds in" in summary and "0 failing seed(s)" in summary, summary


def test_same_seed_same_trace() -> None:
    first, second = run_seed(7), run_seed(7)
    assert first.trace == second.trace
    assert len(first.trace) > 100
    assert run_seed(8).digest != first.digest


def test_same_trace_in_another_process() -> None:
    here = run_seed(11).digest
    out = subprocess.run(
        [sys.executable, "-m", "tests.sim", "--seed", "11"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONHASHSEED": "12345"},  # not this process's: must not matter
    )
    assert f"trace sha256: {here}" in out.stdout, out.stdout + out.stderr


def test_a_failure_says_how_to_replay_it_and_replays() -> None:
    seed = table.load()["no-fence"].first
    assert seed is not None, "no-fence is never caught: see tests/sim/table.py"
    result = run_seed(seed, mutation="no-fence")
    assert result.violations, f"seed {seed} no longer catches no-fence: see tests/sim/table.py"
    text = describe(result, "no-fence")
    assert f"seed {seed}:" in text
    assert f"python -m tests.sim --seed {seed} --trace --mutation no-fence" in text
    # The replay is the same run: same violations, same trace.
    again = run_seed(seed, mutation="no-fence")
    assert again.violations == result.violations and again.digest == result.digest


@pytest.mark.parametrize("seed", [2711, 2780])
def test_timer_regression_seeds(seed: int) -> None:
    """The seeds that found durable sleeps ending early (fixed with Activation.after/passed),
    in the workload of then (before transaction steps and limits joined it, which changed
    every seed's run); the fixes' own regression tests are in tests/unit/test_clock.py."""
    result = run_seed(seed)
    assert not result.violations, describe(result)
