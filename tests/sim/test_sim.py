"""The deterministic simulator's own tests (see docs/reliability.md).

- ``test_seeds``: ``RAFTFLOW_SIM_SEEDS`` seeds (default 30, a few seconds) all pass every
  invariant; a failure names its seed and the command that replays it with a trace.
- the same seed gives the same trace, byte for byte -- in this process and in another one;
- each planted bug (tests/sim/mutations.py) is caught by some seed within a small budget.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.sim.cli import describe
from tests.sim.sim import run_seed

SEEDS = int(os.environ.get("RAFTFLOW_SIM_SEEDS", "30"))
FIRST = int(os.environ.get("RAFTFLOW_SIM_FIRST", "0"))
#: Seeds a planted bug must be caught within (each was caught well before; see the docs).
MUTATION_BUDGET = 150


def test_seeds() -> None:
    started = time.perf_counter()
    failures = []
    for seed in range(FIRST, FIRST + SEEDS):
        result = run_seed(seed)
        if result.violations:
            failures.append(describe(result))
    elapsed = time.perf_counter() - started
    print(f"\nsim: {SEEDS} seeds in {elapsed:.1f}s ({SEEDS / elapsed:.1f} seeds/s)")
    assert not failures, "\n".join(failures)


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


#: The first seed that caught each (python -m tests.sim --mutation NAME --stop); tried first.
CAUGHT_BY = {
    "no-fence": 96,
    "no-final-fence": 151,
    "stale-not-found": 0,
    "heartbeat-race": 10,
    "early-timers": 2711,
}


@pytest.mark.parametrize("mutation", sorted(CAUGHT_BY))
def test_planted_bug_is_caught(mutation: str) -> None:
    known = CAUGHT_BY[mutation]
    for seed in [known, *(s for s in range(MUTATION_BUDGET) if s != known)]:
        result = run_seed(seed, mutation=mutation)
        if result.violations:
            print(f"\n{mutation}: caught by seed {seed}: {result.violations[0]}")
            return
    pytest.fail(f"{mutation}: no seed of 0..{MUTATION_BUDGET - 1} caught it")


def test_a_failure_says_how_to_replay_it_and_replays() -> None:
    seed = CAUGHT_BY["no-fence"]
    result = run_seed(seed, mutation="no-fence")
    assert result.violations, f"seed {seed} no longer catches no-fence: update CAUGHT_BY"
    text = describe(result, "no-fence")
    assert f"seed {seed}:" in text
    assert f"python -m tests.sim --seed {seed} --trace --mutation no-fence" in text
    # The replay is the same run: same violations, same trace.
    again = run_seed(seed, mutation="no-fence")
    assert again.violations == result.violations and again.digest == result.digest


@pytest.mark.parametrize("seed", [2711, 2780])
def test_timer_regression_seeds(seed: int) -> None:
    """The seeds that found durable sleeps ending early (fixed with Activation.after/passed)."""
    result = run_seed(seed)
    assert not result.violations, describe(result)
