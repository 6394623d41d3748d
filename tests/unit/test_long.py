"""Long executions: a worker keeps a run suspended between its turns and resumes it in
memory when it claims the execution again and finds nothing changed -- no history read, no
replay. Any doubt (another worker ran it, the cache evicted it) falls back to a replay.

The claim's history reads are counted at the connection: ``store.claimed_steps`` rows
(the claim's own read) and ``store.steps_page`` rows (the rest of a long history)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.db.flow import Request, Response, Result

from raftflow import Engine, Hooks, InvalidArgumentError


class RowsRead:
    """Counts the step records the worker's claims read, by wrapping the connection."""

    def __init__(self, engine: Engine) -> None:
        connection = engine.store.database.connection
        send = connection.send
        self.rows = 0
        self.lock = threading.Lock()

        run_at_once, send_rest = connection.run_at_once, connection.send_rest

        def count(request: Request, results: tuple[Result, ...], start: int = 0) -> None:
            pairs = zip(request.statements[start:], results[start:])
            for statement, result in pairs:
                if statement.name in ("store.claimed_steps", "store.steps_page"):
                    with self.lock:
                        self.rows += len(result.rows)

        def counting(request: Request) -> Response:
            response = send(request)
            count(request, response.results)
            return response

        def counting_at_once(request: Request) -> tuple[Result, ...]:
            done = run_at_once(request)
            count(request, done)
            return done

        def counting_rest(request: Request, done: tuple[Result, ...]) -> Response:
            response = send_rest(request, done)
            count(request, response.results, start=len(done))
            return response

        # The worker's loop sends through run_at_once (and send_rest), the rest through send.
        connection.send = counting
        connection.run_at_once = counting_at_once
        connection.send_rest = counting_rest


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'long.db'}")
    yield engine
    engine.close()


def counted_chain(engine: Engine, name: str = "chain") -> tuple[Any, Counter[int], list[int]]:
    runs: Counter[int] = Counter()
    bodies: list[int] = []

    @engine.step(name=f"{name}_step")
    def step(i: int) -> int:
        runs[i] += 1
        return i

    @engine.workflow(name=name)
    def chain(n: int) -> int:
        bodies.append(n)
        return sum(step(i) for i in range(n))

    return chain, runs, bodies


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_the_same_worker_resumes_without_reading_the_history(engine: Engine, kind: str) -> None:
    if kind == "sync":
        chain, runs, bodies = counted_chain(engine)
    else:
        runs, bodies = Counter[int](), []

        @engine.step
        async def step(i: int) -> int:
            runs[i] += 1
            return i

        @engine.workflow
        async def chain(n: int) -> int:
            bodies.append(n)
            return sum([await step(i) for i in range(n)])

    reads = RowsRead(engine)
    handle = engine.start(chain, 40)
    with engine.running_worker(concurrency=1, steps_per_turn=4, yield_idle_turns=True) as worker:
        assert handle.result(timeout=30) == sum(range(40))
    assert runs == Counter({i: 1 for i in range(40)})
    assert bodies == [40]  # the workflow's code ran once: no replay
    assert worker.stats.resumed >= 9  # 10 turns of 4 steps: every claim after the first
    assert reads.rows == 0  # and no claim read a recorded step


def test_an_evicted_continuation_is_replayed(engine: Engine) -> None:
    chain, runs, bodies = counted_chain(engine)
    reads = RowsRead(engine)
    handles = [engine.start(chain, 12) for _ in range(3)]
    # Room for one kept run: three executions taking turns evict each other.
    with engine.running_worker(
        concurrency=1, steps_per_turn=2, sticky_cache=1, yield_idle_turns=True
    ) as worker:
        assert [h.result(timeout=30) for h in handles] == [sum(range(12))] * 3
    assert sum(runs.values()) == 36  # every step once, whatever was replayed
    assert len(bodies) > 3 and reads.rows > 0  # replays happened, reading the history
    assert worker.stats.resumed < worker.stats.claimed


def test_the_memory_limit_drops_kept_runs(engine: Engine) -> None:
    """sticky_cache_mb below the process's resident memory: no run is kept between turns,
    every turn replays (and the steps still run once each)."""
    chain, runs, bodies = counted_chain(engine)
    handle = engine.start(chain, 12)
    with engine.running_worker(
        concurrency=1, steps_per_turn=3, sticky_cache_mb=1, yield_idle_turns=True
    ) as worker:
        assert handle.result(timeout=30) == sum(range(12))
    assert runs == Counter({i: 1 for i in range(12)})
    assert worker.stats.resumed == 0 and len(bodies) == 4  # 4 turns, each a replay
    with pytest.raises(InvalidArgumentError, match="sticky_cache_mb"):
        engine.worker(sticky_cache_mb=0)


def test_a_stale_continuation_is_never_resumed(tmp_path: Path) -> None:
    """Two workers (two engines on one file) alternate on one execution: each keeps its run
    between turns, and each must replay what the other recorded instead of resuming."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first, second = Engine.from_url(url), Engine.from_url(url)

    class StepAside(Hooks):
        """After each of its turns a worker stalls a moment: the other claims meanwhile."""

        def turn_ended(self, record: Any) -> None:
            time.sleep(0.15)

    try:
        for engine in (first, second):
            engine.add_hooks(StepAside())
        chains = [counted_chain(engine) for engine in (first, second)]
        handle = first.start(chains[0][0], 30)
        with (
            first.running_worker(concurrency=1, steps_per_turn=1, yield_idle_turns=True) as one,
            second.running_worker(concurrency=1, steps_per_turn=1, yield_idle_turns=True) as two,
        ):
            assert handle.result(timeout=60) == sum(range(30))
        runs = chains[0][1] + chains[1][1]
        assert runs == Counter({i: 1 for i in range(30)}), runs  # no step ran twice
        took = (one.stats.claimed + one.stats.adopted, two.stats.claimed)
        assert min(took) > 0, f"the workers did not alternate: {took}"
        records = handle.steps()
        assert [r.idx for r in records] == list(range(30))
        assert sum(1 for r in records if r.worker_id.startswith(one.worker_id)) > 0
    finally:
        first.close()
        second.close()


def test_a_long_history_is_read_in_pages(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    from raftflow.stores import claim

    monkeypatch.setattr(claim, "HISTORY_PAGE", 7)
    chain, runs, bodies = counted_chain(engine)
    reads = RowsRead(engine)
    handle = engine.start(chain, 30)
    # No kept runs: each turn replays, reading the history 7 records at a time.
    with engine.running_worker(
        concurrency=1, steps_per_turn=10, sticky_cache=0, yield_idle_turns=True
    ):
        assert handle.result(timeout=30) == sum(range(30))
    assert runs == Counter({i: 1 for i in range(30)})
    assert len(bodies) == 3 and reads.rows == 10 + 20  # turns 2 and 3 read 10 and 20


def test_the_history_limit_warns_at_80_percent_then_stops_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from raftflow import HistoryLimitError, WorkflowFailedError

    engine = Engine.from_url(f"sqlite:///{tmp_path / 'limit.db'}", max_history=10)
    try:
        chain, runs, _ = counted_chain(engine)
        handle = engine.start(chain, 20)
        with engine.running_worker(), pytest.raises(WorkflowFailedError) as failed:
            handle.result(timeout=20)
        assert failed.value.error.type == HistoryLimitError.__name__
        assert "continue_as_new" in failed.value.error.message
        assert sum(runs.values()) == 10  # the 11th call was refused
        assert "80% of the history limit" in caplog.text
    finally:
        engine.close()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_continue_as_new_keeps_the_id_and_starts_a_clean_history(engine: Engine, kind: str) -> None:
    from raftflow import Status

    if kind == "sync":

        @engine.step
        def tick(i: int) -> int:
            return i

        @engine.workflow
        def poller(state: dict[str, int]) -> int:
            total = state["total"] + tick(state["round"]) + tick(100)
            if state["round"] < 3:
                engine.continue_as_new({"round": state["round"] + 1, "total": total})
            return total

    else:

        @engine.step
        async def tick(i: int) -> int:
            return i

        @engine.workflow
        async def poller(state: dict[str, int]) -> int:
            total = state["total"] + await tick(state["round"]) + await tick(100)
            if state["round"] < 3:
                engine.continue_as_new({"round": state["round"] + 1, "total": total})
            return total

    handle = engine.start(poller, {"round": 0, "total": 0})
    with engine.running_worker():
        assert handle.result(timeout=20) == (0 + 1 + 2 + 3) + 4 * 100
    assert [s.output for s in handle.steps()] == [3, 100]  # the last run's history only
    runs = handle.runs()
    assert [r.id for r in runs] == [f"{handle.id}#{n}" for n in (1, 2, 3)]
    assert all(r.status is Status.CONTINUED for r in runs)
    assert [r.input for r in runs] == [
        {"round": 0, "total": 0},
        {"round": 1, "total": 100},
        {"round": 2, "total": 201},
    ]
    assert [s.output for s in engine.get(runs[1].id).steps()] == [1, 100]
    assert handle.info().run == 4


def test_a_continuation_displaced_under_its_id_is_woken_to_unwind() -> None:
    """A run commits the end of its turn, then suspends. A slow thread may suspend only
    after the worker claimed the next event and started a replay, which suspends too: two
    runs kept under one id. The one displaced must be woken (it unwinds), not dropped: a
    dropped run's thread waits forever, and a process with one cannot exit (its pool's
    threads are joined at exit: ``raftflow demo`` hung so, once in about 8 runs)."""
    from raftflow.engine.runtime.runcache import RunCache

    discarded: list[object] = []

    class Run:
        execution_id = "x"

        def discard(self) -> None:
            discarded.append(self)

    cache = RunCache(size=8, limit_mb=None)
    first, second = Run(), Run()
    cache.keep(first)  # type: ignore[arg-type]
    cache.keep(first)  # type: ignore[arg-type]  # the same run again: kept
    assert discarded == [] and list(cache.runs.values()) == [first]
    cache.keep(second)  # type: ignore[arg-type]
    assert discarded == [first] and list(cache.runs.values()) == [second]
