"""The committer's two paths (engine/runtime/committer.py), on the embedded backend.

A commit from the only execution a worker runs goes at once, from the execution's own
task: nothing could share its request, and the hand-offs to the committer's task and
back are loop turns on every step ("Latency", docs/performance.md). Executions running
together still share requests: that is what keeps Raft entries per step low at load.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from raftflow import Engine, Hooks


class BatchRecorder(Hooks):
    """Each commit request: its size, and the coroutine of the task that sent it."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, str]] = []

    def after_commit_batch(
        self, *, size: int, applied: int, duration: float, error: BaseException | None
    ) -> None:
        assert error is None and applied == size
        task = asyncio.current_task()
        assert task is not None
        self.batches.append((size, task.get_coro().__qualname__))  # type: ignore[union-attr]


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = Engine.from_url("sqlite://")
    yield engine
    engine.close()


def _chain(engine: Engine) -> object:
    @engine.step
    async def tick(i: int) -> int:
        await asyncio.sleep(0)
        return i

    @engine.workflow
    async def chain(steps: int) -> int:
        total = 0
        for i in range(steps):
            total += await tick(i)
        return total

    return chain


def test_a_lone_execution_sends_each_commit_from_its_own_task(engine: Engine) -> None:
    chain = _chain(engine)
    recorder = BatchRecorder()
    engine.add_hooks(recorder)
    with engine.running_worker(concurrency=1):
        assert engine.start(chain, 5).result(timeout=10) == 10
    # Four step commits within the turn and the outcome's, each alone in its request and
    # sent by the task that runs the workflow (run_async), not the committer's (_flush).
    assert recorder.batches == [(1, "run_async")] * 5


def test_executions_running_together_still_share_commit_requests(engine: Engine) -> None:
    chain = _chain(engine)
    handles = [engine.start(chain, 5) for _ in range(8)]  # queued before the worker runs
    recorder = BatchRecorder()
    engine.add_hooks(recorder)
    with engine.running_worker(concurrency=8):
        assert [h.result(timeout=10) for h in handles] == [10] * 8
    commits = sum(size for size, _ in recorder.batches)
    assert commits == 8 * 5
    # Eight executions advancing in step: their commits go together, by the committer.
    assert len(recorder.batches) <= commits / 4, recorder.batches
    assert any(size > 1 and sender == "Committer._flush" for size, sender in recorder.batches)
