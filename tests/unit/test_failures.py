"""A failure outside user code never becomes a workflow's outcome.

Each test injects one failure where the engine talks to its database or reads its clock --
the committer's request, the clock of a commit, the heartbeat, the claim's read-back --
into an embedded engine (a SQLite file: the same flows and SQL as on rqlite), and checks
that the execution is handed back, logged with its cause, and later succeeds with every
step recorded once and no FAILED outcome ever written.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.db.flow import Flow, Request

from raftflow import Engine, Status
from raftflow.errors import UnavailableError

Predicate = Callable[[Request], bool]


class Faults:
    """Makes the engine's connection (and clock) raise, a given number of times, on the
    requests a predicate picks."""

    def __init__(self, engine: Engine) -> None:
        self.connection = engine.store.database.connection
        self.send = self.connection.send
        self.rules: list[tuple[Predicate, BaseException, list[int]]] = []
        self.raised = 0
        self.lock = threading.Lock()
        self.run_at_once = self.connection.run_at_once
        # The worker's async twin sends through run_at_once (on its loop), the rest of the
        # engine through send.
        self.connection.send = self._send
        self.connection.run_at_once = self._run_at_once

    def fail(self, predicate: Predicate, error: BaseException, times: int = 1) -> None:
        self.rules.append((predicate, error, [times]))

    def _check(self, request: Request) -> None:
        with self.lock:
            for predicate, error, left in self.rules:
                if left[0] > 0 and predicate(request):
                    left[0] -= 1
                    self.raised += 1
                    raise error

    def _send(self, request: Request) -> Any:
        self._check(request)
        return self.send(request)

    def _run_at_once(self, request: Request) -> Any:
        self._check(request)
        return self.run_at_once(request)


def names(request: Request) -> set[str]:
    return {statement.name for statement in request.statements}


def is_commit(request: Request) -> bool:
    return bool(
        {
            "store.commit",
            "store.lean_commit",
            "store.lean_step",
            "store.lean_final",
            "store.lean_finals",
        }
        & names(request)
    )


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'faults.db'}")
    yield engine
    engine.close()


def three_step_workflow(engine: Engine) -> tuple[Any, list[int]]:
    runs: list[int] = []

    @engine.step
    def bump(i: int) -> int:
        runs.append(i)
        return i + 1

    @engine.workflow
    def chain(start: int) -> int:
        return bump(bump(bump(start)))

    return chain, runs


def assert_succeeded_once(engine: Engine, handle: Any, runs: list[int]) -> None:
    assert handle.result(timeout=20) == 3
    assert handle.status() is Status.SUCCEEDED
    steps = handle.steps()
    assert [(s.idx, s.succeeded) for s in steps] == [(0, True), (1, True), (2, True)]
    assert engine.list(status="failed") == []
    # At least once: a step whose commit failed may run again, but each is recorded once.
    assert sorted(set(runs)) == [0, 1, 2]


@pytest.mark.parametrize(
    "error",
    [
        UnavailableError("injected: no leader", ambiguous=True),
        ValueError("injected: a bug in the engine"),
        KeyError("injected"),
    ],
    ids=["unavailable", "ValueError", "KeyError"],
)
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_failed_commit_hands_the_execution_back(
    engine: Engine, error: BaseException, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    if kind == "sync":
        chain, runs = three_step_workflow(engine)
    else:
        runs = []

        @engine.step
        async def bump(i: int) -> int:
            runs.append(i)
            return i + 1

        @engine.workflow
        async def chain(start: int) -> int:
            return await bump(await bump(await bump(start)))

    faults = Faults(engine)
    faults.fail(is_commit, error, times=2)
    caplog.set_level(logging.WARNING, logger="raftflow.worker")
    handle = engine.start(chain, 0)
    with engine.running_worker(retry_delay=0.05) as worker:
        assert_succeeded_once(engine, handle, runs)
    assert faults.raised == 2
    assert worker.stats.handed_back == 2
    assert "its commit failed" in caplog.text and "handing it back" in caplog.text
    assert type(error).__name__ in caplog.text


def test_a_failing_clock_hands_the_execution_back(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    chain, runs = three_step_workflow(engine)
    commits = engine.store.commits  # the commit flow's clock: its reading starts a commit
    real = commits.clock
    failures = [1]

    class FlakyClock:
        def now(self) -> Flow[float]:
            # After a step ran, the next reading on the worker is its commit's (with one
            # slot busy, the worker does not poll).
            if failures[0] and runs and threading.current_thread().name == "raftflow-worker":
                failures[0] -= 1
                raise ValueError("injected: the clock query returned no time")
            return (yield from real.now())

        def estimate(self) -> float:
            return real.estimate()

    handle = engine.start(chain, 0)
    caplog.set_level(logging.WARNING, logger="raftflow.worker")
    commits.clock = FlakyClock()  # type: ignore[assignment]
    with engine.running_worker(concurrency=1, retry_delay=0.05) as worker:
        assert_succeeded_once(engine, handle, runs)
    commits.clock = real
    assert failures == [0]
    assert "its commit failed (ValueError: injected: the clock query" in caplog.text
    assert worker.stats.handed_back == 1


def test_a_failing_heartbeat_is_logged_and_the_next_beat_renews(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[int] = []

    @engine.step
    def slow(i: int) -> int:
        runs.append(i)
        time.sleep(2.5)  # several leases long: only the heartbeat keeps it
        return i

    @engine.workflow
    def wf(i: int) -> int:
        return slow(i)

    faults = Faults(engine)
    faults.fail(lambda r: "queue.extend" in names(r), RuntimeError("injected heartbeat bug"))
    caplog.set_level(logging.WARNING, logger="raftflow.worker")
    handle = engine.start(wf, 7)
    with engine.running_worker(visibility=1.0) as worker:
        assert handle.result(timeout=20) == 7
    assert faults.raised == 1
    assert "heartbeat failed: injected heartbeat bug" in caplog.text
    assert runs == [7]  # the lease never lapsed: nobody ran the step again
    assert worker.stats.claimed == 1 and worker.stats.fenced == 0


def test_an_unreadable_claim_gives_its_leases_back_at_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from raftflow.stores import claim as claim_module

    chain, runs = three_step_workflow(engine)
    real = claim_module.execution_from_row
    failures = [1]

    def broken(row: dict[str, Any]) -> Any:
        if failures[0]:
            failures[0] -= 1
            raise KeyError("injected: a column the parser expects")
        return real(row)

    monkeypatch.setattr(claim_module, "execution_from_row", broken)
    caplog.set_level(logging.WARNING, logger="raftflow.worker")
    handle = engine.start(chain, 0)
    started = time.monotonic()
    with engine.running_worker(visibility=60, retry_delay=0.05):
        assert_succeeded_once(engine, handle, runs)
    # Given back, not left for its 60 s lease to lapse.
    assert time.monotonic() - started < 45
    assert "claim failed, retrying" in caplog.text


def test_a_database_error_in_workflow_code_is_not_the_outcome(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    calls = [0]

    @engine.workflow
    def wf(x: int) -> int:
        calls[0] += 1
        if calls[0] == 1:
            raise UnavailableError("injected: the workflow's own client call failed")
        return x * 2

    caplog.set_level(logging.WARNING, logger="raftflow.worker")
    handle = engine.start(wf, 21)
    with engine.running_worker(retry_delay=0.05):
        assert handle.result(timeout=20) == 42
    assert calls[0] == 2
    assert "a database call failed in workflow code" in caplog.text


def test_stop_before_run_returns_at_once(engine: Engine) -> None:
    import asyncio

    worker = engine.worker()
    worker.stop()
    asyncio.run(worker.run())  # returns: it did not start (it would run until stopped)
    assert worker.stats.polls == 0 and worker.stats.claims == 0
