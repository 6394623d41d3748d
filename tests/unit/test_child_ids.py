"""A child's id is its own: a parent never adopts an execution it did not start.

A parent waits for its children by their ``parent_id`` (a finished child wakes it). An
execution that already has the child's id -- started independently, or by another parent
-- is not one: adopting it left the parent waiting for ever. The start is refused instead,
as the call's recorded failure (so every replay raises the same), and the default ids of
a run after ``continue_as_new`` are not the ids of the runs before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftflow import (
    Engine,
    ExecutionConflictError,
    Status,
    WorkflowFailedError,
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'children.db'}")
    yield engine
    engine.close()


def define(engine: Engine, kind: str, child_id: str | None) -> tuple[Any, Any]:
    """A child workflow, and a parent that starts one (``child_id``: its explicit id) and
    returns its result."""

    @engine.workflow
    def child(n: int) -> int:
        return n * 10

    if kind == "sync":

        @engine.workflow
        def parent(n: int) -> int:
            return engine.start(child, n, execution_id=child_id).result()

    else:

        @engine.workflow
        async def parent(n: int) -> int:
            handle = await engine.start_async(child, n, execution_id=child_id)
            return await handle.result_async()

    return child, parent


def assert_refused(engine: Engine, handle: Any, taken: str) -> None:
    with pytest.raises(WorkflowFailedError) as caught:
        handle.result(timeout=10)
    assert caught.value.error.type == "ExecutionConflictError"
    assert taken in caught.value.error.message
    assert "not a child" in caught.value.error.message
    # The refusal is the child call's record: a replay raises it again, starts nothing.
    (call,) = handle.steps()
    assert (call.kind, call.succeeded) == ("child", False)
    assert call.error is not None and call.error.type == "ExecutionConflictError"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_default_child_id_taken_by_an_independent_execution_fails_the_parent(
    engine: Engine, kind: str
) -> None:
    child, parent = define(engine, kind, None)
    independent = engine.start(child, 1, execution_id="order-7/0")  # the parent's call 0
    with engine.running_worker():
        assert independent.result(timeout=10) == 10
        handle = engine.start(parent, 2, execution_id="order-7")
        assert_refused(engine, handle, "'order-7/0'")
    assert independent.info().parent_id is None
    assert handle.children() == []


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_explicit_child_id_of_another_parents_child_is_refused(
    engine: Engine, kind: str
) -> None:
    _child, parent = define(engine, kind, "shared")
    with engine.running_worker():
        first = engine.start(parent, 1)
        assert first.result(timeout=10) == 10
        second = engine.start(parent, 2)
        assert_refused(engine, second, "'shared'")
    assert engine.get("shared").info().parent_id == first.id
    assert [c.id for c in first.children()] == ["shared"]


def test_an_explicit_child_id_of_an_independent_execution_is_refused(engine: Engine) -> None:
    child, parent = define(engine, "sync", "nightly")
    engine.start(child, 5, execution_id="nightly")
    with engine.running_worker():
        assert_refused(engine, engine.start(parent, 1), "'nightly'")


def test_a_refused_child_start_can_be_handled_by_the_workflow(engine: Engine) -> None:
    @engine.workflow
    def child(n: int) -> int:
        return n

    @engine.workflow
    def parent(n: int) -> str:
        try:
            engine.start(child, n, execution_id="taken")
        except ExecutionConflictError:
            engine.sleep(0.01)  # a wait: the run goes on after it, or replays to it
            return "refused"
        return "started"

    engine.start(child, 0, execution_id="taken")
    with engine.running_worker():
        handle = engine.start(parent, 1)
        assert handle.result(timeout=10) == "refused"
    assert handle.status() is Status.SUCCEEDED
    assert [(s.kind, s.succeeded) for s in handle.steps()] == [("child", False), ("sleep", True)]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_each_run_after_continue_as_new_starts_children_of_its_own(
    engine: Engine, kind: str
) -> None:
    @engine.workflow
    def child(n: int) -> int:
        return n * 10

    if kind == "sync":

        @engine.workflow
        def rounds(n: int) -> int:
            result = engine.start(child, n).result()
            if n < 2:
                engine.continue_as_new(n + 1)
            return result

    else:

        @engine.workflow
        async def rounds(n: int) -> int:
            result = await (await engine.start_async(child, n)).result_async()
            if n < 2:
                engine.continue_as_new(n + 1)
            return result

    with engine.running_worker():
        handle = engine.start(rounds, 0, execution_id="rounds")
        assert handle.result(timeout=10) == 20
    children = sorted((c.id, c.input) for c in handle.children())
    assert [n for _, n in children] == [0, 1, 2]
    assert len({child_id for child_id, _ in children}) == 3
