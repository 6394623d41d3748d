"""The engine's semantics on the embedded backend (an in-memory SQLite database).

The same engine code runs on rqlite; tests/integration covers it there with real
processes and real faults. These pin down the model: typed results, step errors,
replay without re-running steps, idempotent starts, bad input.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from raftflow.engine.workflow.events import RUN

from raftflow import (
    Engine,
    ExecutionConflictError,
    ExecutionNotFoundError,
    InputValidationError,
    NotInWorkflowError,
    ResultTimeoutError,
    Status,
    StepError,
    UnknownWorkflowError,
    WorkflowFailedError,
)


class Order(BaseModel):
    id: str
    amount: float


class Receipt(BaseModel):
    id: str
    charged: float


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine.from_url("sqlite://")
    yield engine
    engine.close()


def test_sync_workflow_returns_typed_result(engine: Engine) -> None:
    @engine.step
    def charge(order_id: str, amount: float) -> str:
        return f"r-{order_id}-{amount}"

    @engine.workflow
    def checkout(order: Order) -> Receipt:
        return Receipt(id=charge(order.id, order.amount), charged=order.amount)

    handle = engine.start(checkout, Order(id="o1", amount=9.5))
    assert handle.status() is Status.PENDING
    with engine.running_worker(concurrency=2):
        receipt = handle.result(timeout=10)
    assert receipt == Receipt(id="r-o1-9.5", charged=9.5)
    assert handle.status() is Status.SUCCEEDED
    assert [(s.idx, s.name, s.output) for s in handle.steps()] == [(0, "charge", "r-o1-9.5")]


def test_async_workflow_with_sync_and_async_steps(engine: Engine) -> None:
    threads: list[str] = []

    @engine.step
    def blocking(x: int) -> int:
        threads.append(threading.current_thread().name)
        return x + 1

    @engine.step
    async def non_blocking(x: int) -> int:
        await asyncio.sleep(0)
        return x * 10

    @engine.workflow
    async def pipeline(x: int) -> int:
        return await non_blocking(await blocking(x))

    handle = engine.start(pipeline, 4)
    with engine.running_worker():
        assert handle.result(timeout=10) == 50
    assert threads and threads[0] != "raftflow-worker"  # the sync step ran off the loop


def test_input_is_validated_at_start_and_nothing_is_written(engine: Engine) -> None:
    @engine.workflow
    def checkout(order: Order) -> Receipt:
        return Receipt(id=order.id, charged=order.amount)

    with pytest.raises(InputValidationError, match="amount"):
        engine.start(checkout, {"id": "o1", "amount": "lots"})
    assert engine.list() == []
    assert engine.transport.stats().messages == 0


def test_dict_input_is_validated_into_the_model(engine: Engine) -> None:
    @engine.workflow
    def checkout(order: Order) -> float:
        assert isinstance(order, Order)
        return order.amount * 2

    handle = engine.start(checkout, {"id": "o1", "amount": "2.5"})
    with engine.running_worker():
        assert handle.result(timeout=10) == 5.0


def test_unregistered_workflow_is_refused(engine: Engine) -> None:
    def not_registered(x: int) -> int:
        return x

    with pytest.raises(UnknownWorkflowError):
        engine.start(not_registered, 1)
    with pytest.raises(UnknownWorkflowError):
        engine.start("no-such-workflow", 1)
    assert engine.list() == []


def test_step_error_reaches_the_workflow_as_step_error(engine: Engine) -> None:
    @engine.step
    def flaky(x: int) -> int:
        raise ValueError(f"bad {x}")

    @engine.workflow
    def tolerant(x: int) -> str:
        try:
            flaky(x)
        except StepError as exc:
            return f"{exc.error.type}: {exc.error.message}"
        return "no error"

    handle = engine.start(tolerant, 7)
    with engine.running_worker():
        assert handle.result(timeout=10) == "ValueError: bad 7"
    [step] = handle.steps()
    assert not step.succeeded and step.error is not None and step.error.type == "ValueError"


def test_failed_workflow_raises_typed_error_with_traceback(engine: Engine) -> None:
    @engine.workflow
    def broken(x: int) -> int:
        raise KeyError(f"missing {x}")

    handle = engine.start(broken, 3)
    with engine.running_worker(), pytest.raises(WorkflowFailedError) as caught:
        handle.result(timeout=10)
    assert caught.value.error.type == "KeyError"
    assert "missing 3" in caught.value.error.message
    assert "raise KeyError" in caught.value.error.traceback
    assert handle.status() is Status.FAILED


def test_unserializable_step_result_fails_the_step_clearly(engine: Engine) -> None:
    @engine.step
    def handle_of_file() -> Any:
        return object()

    @engine.workflow
    def leaky() -> None:
        handle_of_file()

    handle = engine.start(leaky)
    with engine.running_worker(), pytest.raises(WorkflowFailedError) as caught:
        handle.result(timeout=10)
    assert "not JSON-serializable" in caught.value.error.message or "serialize" in (
        caught.value.error.message
    )


def test_result_not_matching_annotation_fails_the_execution(engine: Engine) -> None:
    @engine.workflow
    def liar() -> int:
        return "not an int"  # type: ignore[return-value]

    handle = engine.start(liar)
    with engine.running_worker(), pytest.raises(WorkflowFailedError, match="annotation"):
        handle.result(timeout=10)


def test_start_with_execution_id_is_idempotent(engine: Engine) -> None:
    runs = Counter[str]()

    @engine.step
    def work(x: int) -> int:
        runs["work"] += 1
        return x

    @engine.workflow
    def once(x: int) -> int:
        return work(x)

    @engine.workflow
    def other(x: int) -> int:
        return x

    first = engine.start(once, 1, execution_id="fixed-id")
    second = engine.start(once, 2, execution_id="fixed-id")
    assert first.created and not second.created
    assert len(engine.list()) == 1
    with pytest.raises(ExecutionConflictError):
        engine.start(other, 1, execution_id="fixed-id")
    with engine.running_worker():
        assert second.result(timeout=10) == 1  # the first input won
    assert runs["work"] == 1


def test_replay_reuses_recorded_steps(engine: Engine) -> None:
    """With one step per turn every step ends the worker's turn and, with no continuation
    kept (sticky_cache=0), the next claim replays the workflow from the start: recorded
    steps return without running again."""
    step_runs = Counter[int]()
    body_runs = 0

    @engine.step
    def square(i: int) -> int:
        step_runs[i] += 1
        return i * i

    @engine.workflow
    def squares(n: int) -> list[int]:
        nonlocal body_runs
        body_runs += 1
        return [square(i) for i in range(n)]

    handle = engine.start(squares, 5)
    with engine.running_worker(steps_per_turn=1, sticky_cache=0, yield_idle_turns=True):
        assert handle.result(timeout=10) == [0, 1, 4, 9, 16]
    assert step_runs == Counter({i: 1 for i in range(5)})  # never twice
    assert body_runs >= 5  # replayed after every step


def test_nondeterministic_workflow_fails_with_a_clear_error(engine: Engine) -> None:
    calls = 0

    @engine.step
    def first() -> int:
        return 1

    @engine.step
    def second() -> int:
        return 2

    @engine.workflow
    def fickle() -> int:
        nonlocal calls
        calls += 1
        # Replays take another path than the first run: not allowed.
        head = first() if calls == 1 else second()
        return head + first()

    handle = engine.start(fickle)
    with (
        engine.running_worker(steps_per_turn=1, sticky_cache=0, yield_idle_turns=True),
        pytest.raises(WorkflowFailedError) as caught,
    ):
        handle.result(timeout=10)
    assert caught.value.error.type == "NonDeterminismError"


def test_long_execution_does_not_starve_short_ones(engine: Engine) -> None:
    finished: list[str] = []
    lock = threading.Lock()

    @engine.step
    def tick(i: int) -> int:
        return i

    @engine.workflow
    def run(spec: dict[str, Any]) -> str:
        for i in range(spec["steps"]):
            tick(i)
        with lock:
            finished.append(spec["name"])
        return str(spec["name"])

    long = engine.start(run, {"name": "long", "steps": 300})
    shorts = [engine.start(run, {"name": f"short{i}", "steps": 3}) for i in range(5)]
    with engine.running_worker(concurrency=1, steps_per_turn=8):
        long.result(timeout=60)
        for handle in shorts:
            handle.result(timeout=60)
    assert finished[-1] == "long", finished


def test_a_turn_goes_on_while_nothing_else_waits(engine: Engine) -> None:
    """Past steps_per_turn an execution is handed back only for another that waits to
    be claimed: alone, it runs its 40 steps in the turn it was handed at its start (no
    claim, no replay); with yield_idle_turns it is handed back every 4 steps, as before."""
    bodies = 0

    @engine.step
    def tick(i: int) -> int:
        return i

    @engine.workflow
    def forty() -> int:
        nonlocal bodies
        bodies += 1
        return sum(tick(i) for i in range(40))

    with engine.running_worker(concurrency=1, steps_per_turn=4, sticky_cache=0) as worker:
        assert engine.start(forty).result(timeout=30) == 780
    assert worker.stats.claims == 0
    assert bodies == 1
    bodies = 0
    with engine.running_worker(
        concurrency=1, steps_per_turn=4, sticky_cache=0, yield_idle_turns=True
    ) as worker:
        assert engine.start(forty).result(timeout=30) == 780
    assert worker.stats.claims >= 9  # each turn after the first
    assert bodies >= 10  # replayed at every turn (no sticky cache)


def test_get_list_and_timeouts(engine: Engine) -> None:
    @engine.workflow
    def noop() -> None:
        return None

    handle = engine.start(noop)
    assert engine.get(handle.id).id == handle.id
    with pytest.raises(ExecutionNotFoundError):
        engine.get("nope")
    with pytest.raises(ResultTimeoutError):
        handle.result(timeout=0.05)  # no worker running
    assert [r.id for r in engine.list(status="pending")] == [handle.id]
    assert engine.list(status=Status.SUCCEEDED) == []


def test_steps_called_outside_a_workflow_are_plain_calls(engine: Engine) -> None:
    @engine.step
    def double(x: int) -> int:
        return 2 * x

    @engine.workflow
    def wf(x: int) -> int:
        return double(x)

    assert double(3) == 6
    assert wf(4) == 8  # calling a workflow directly runs it as plain Python
    assert engine.list() == []


def test_current_step_gives_a_stable_key(engine: Engine) -> None:
    from raftflow import current_step

    keys: list[str] = []

    @engine.step
    def external_call() -> str:
        info = current_step()
        assert info is not None
        keys.append(info.key)
        return info.key

    @engine.step
    async def async_call() -> str:
        info = current_step()
        assert info is not None
        return info.key

    @engine.workflow
    def wf() -> list[str]:
        return [external_call(), external_call(), async_call()]

    handle = engine.start(wf, execution_id="exec-1")
    with engine.running_worker():
        assert handle.result(timeout=10) == ["exec-1/0", "exec-1/1", "exec-1/2"]
    with pytest.raises(NotInWorkflowError, match="only available while a step runs"):
        current_step()  # outside a step: a clear error, not None (so .key type-checks)


def test_priority_floor_serves_only_urgent_executions(engine: Engine) -> None:
    @engine.workflow
    def job(name: str) -> str:
        return name

    low = engine.start(job, "low", priority=0)
    high = engine.start(job, "high", priority=3)
    with engine.running_worker(min_priority=3):
        assert high.result(timeout=10) == "high"
        with pytest.raises(ResultTimeoutError):
            low.result(timeout=0.5)
    assert low.status() is Status.PENDING
    with engine.running_worker():
        assert low.result(timeout=10) == "low"


def test_a_worker_never_claims_an_execution_of_a_workflow_it_does_not_register(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    producer, consumer = Engine.from_url(url), Engine.from_url(url)
    try:

        @producer.workflow
        def only_here(x: int) -> int:
            return x + 1

        @consumer.workflow
        def only_there(x: int) -> int:
            return x - 1

        handle = producer.start(only_here, 1)
        with consumer.running_worker() as worker:
            theirs = consumer.start(only_there, 1)
            assert theirs.result(timeout=10) == 0
            while worker.stats.polls < 5:  # it has looked again and again
                time.sleep(0.02)
        assert worker.stats.claimed == 0  # it ran its own (started here, adopted), no other
        assert worker.stats.adopted == 1
        assert "not registered here" not in caplog.text
        assert handle.status() is Status.PENDING  # never leased: no attempt, no park
        assert consumer.transport.stats().parked == 0
        with producer.running_worker():
            assert handle.result(timeout=10) == 2
    finally:
        producer.close()
        consumer.close()


def test_an_unrouted_event_of_an_unknown_workflow_is_parked_not_crashed_on(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """An execution started without a lane (by a worker of the release before lanes) is
    in the lane every worker serves: one that cannot run it parks it, as before."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    producer, consumer = Engine.from_url(url), Engine.from_url(url)
    try:

        @producer.workflow
        def only_here(x: int) -> int:
            return x + 1

        store = producer.store
        store.run(store.flows.start("old", "only_here", 1, 0, RUN))
        handle = producer.get("old")
        with consumer.running_worker(park_unknown=0.3) as worker:
            while worker.stats.claimed == 0:
                time.sleep(0.02)
        assert "not registered here" in caplog.text
        assert handle.status() is Status.RUNNING  # claimed, parked, not failed
        assert consumer.transport.stats().messages == 1
        with producer.running_worker():  # a worker that knows it runs it after the park
            assert handle.result(timeout=10) == 2
    finally:
        producer.close()
        consumer.close()


def test_payload_over_the_limit_is_refused_before_sending(engine: Engine) -> None:
    from raftflow.errors import PayloadTooLargeError

    @engine.workflow
    def big(data: str) -> int:
        return len(data)

    with pytest.raises(PayloadTooLargeError, match="over the limit"):
        engine.start(big, "x" * (1_048_576 + 1))
    assert engine.list() == []


def test_hooks_see_steps_and_outcomes_and_cannot_break_them(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    from raftflow import Hooks, StepInfo

    seen: list[tuple[str, Any]] = []

    class Recorder(Hooks):
        def before_step(self, step: StepInfo) -> None:
            seen.append(("before", step.name))

        def after_step(
            self, step: StepInfo, *, error: BaseException | None, duration: float
        ) -> None:
            assert duration >= 0
            seen.append(("after", type(error).__name__ if error else None))

        def after_execution(self, execution_id: str, status: Status) -> None:
            seen.append(("done", status))

    class Broken(Hooks):
        def before_step(self, step: StepInfo) -> None:
            raise RuntimeError("hook bug")

    engine.add_hooks(Broken())
    engine.add_hooks(Recorder())

    @engine.step
    def ok(x: int) -> int:
        return x

    @engine.step
    def bad(x: int) -> int:
        raise ValueError(x)

    @engine.workflow
    def wf(x: int) -> int:
        with contextlib.suppress(StepError):
            bad(x)
        return ok(x)

    handle = engine.start(wf, 5)
    with engine.running_worker():
        assert handle.result(timeout=10) == 5
    assert seen == [
        ("before", "bad"),
        ("after", "ValueError"),
        ("before", "ok"),
        ("after", None),
        ("done", Status.SUCCEEDED),
    ]
    assert "hook Broken.before_step failed" in caplog.text
