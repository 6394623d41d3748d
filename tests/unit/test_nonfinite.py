"""NaN and the infinities have no JSON form: one rule at every boundary, never null.

Bad input is refused where it enters (``start``, ``send``, ``set_event``, a child's start,
``continue_as_new``) with :class:`InvalidArgumentError` and nothing written; a step's
result or a workflow's output that holds one is the code's failure, recorded as its error
(the step runs once). Before, a value without an annotation (``Any``) went through
pydantic's JSON mode, which writes NaN as null: the execution ran on a value it was never
given. (Streams do not exist yet; when they do, their items follow the same rule.)
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftflow import Engine, InvalidArgumentError, Status, WorkflowFailedError

NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'nonfinite.db'}")
    yield engine
    engine.close()


@pytest.fixture(params=sorted(NONFINITE))
def bad(request: pytest.FixtureRequest) -> float:
    return NONFINITE[request.param]


def refused(error: str) -> bool:
    return "NaN or an infinity" in error


@pytest.mark.parametrize("annotated", [False, True], ids=["Any", "float"])
def test_a_start_input_is_refused_and_nothing_is_written(
    engine: Engine, bad: float, annotated: bool
) -> None:
    if annotated:

        @engine.workflow
        def wf(x: dict[str, float]) -> Any:
            return x

    else:

        @engine.workflow
        def wf(x: Any) -> Any:  # as unannotated: Any
            return x

    with pytest.raises(InvalidArgumentError) as caught:
        engine.start(wf, {"x": bad})
    assert refused(str(caught.value))
    assert engine.list() == []


def run_to_failure(engine: Engine, wf: Any, *args: Any) -> str:
    handle = engine.start(wf, *args)
    with engine.running_worker(), pytest.raises(WorkflowFailedError) as caught:
        handle.result(timeout=10)
    assert handle.status() is Status.FAILED
    return caught.value.error.message


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_step_result_is_the_steps_recorded_error(engine: Engine, bad: float, kind: str) -> None:
    runs: list[int] = []

    if kind == "sync":

        @engine.step
        def measure() -> Any:
            runs.append(1)
            return {"ratio": bad}

        @engine.workflow
        def wf() -> Any:
            return measure()

    else:

        @engine.step
        async def measure() -> Any:
            runs.append(1)
            return {"ratio": bad}

        @engine.workflow
        async def wf() -> Any:
            return await measure()

    message = run_to_failure(engine, wf)
    assert refused(message) and "measure" in message
    assert runs == [1]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_workflow_output_is_its_recorded_error(engine: Engine, bad: float, kind: str) -> None:
    if kind == "sync":

        @engine.workflow
        def wf() -> Any:
            return [1.0, bad]

    else:

        @engine.workflow
        async def wf() -> Any:
            return [1.0, bad]

    assert refused(run_to_failure(engine, wf))


def test_a_message_is_refused_from_client_code_and_in_a_workflow(
    engine: Engine, bad: float
) -> None:
    @engine.workflow
    def listener() -> Any:
        return engine.recv(timeout=5)

    @engine.workflow
    def sender(target: str) -> None:
        engine.send(target, {"reading": bad})

    target = engine.start(listener)
    with pytest.raises(InvalidArgumentError) as caught:
        engine.send(target.id, {"reading": bad})
    assert refused(str(caught.value))
    assert refused(run_to_failure(engine, sender, target.id))


def test_an_event_value_a_child_input_and_a_next_input_are_refused(
    engine: Engine, bad: float
) -> None:
    @engine.workflow
    def child(x: Any) -> Any:
        return x

    @engine.workflow
    def publishes() -> None:
        engine.set_event("progress", {"done": bad})

    @engine.workflow
    def starts_child() -> Any:
        return engine.start(child, {"x": bad}).result()

    @engine.workflow
    def continues(n: Any) -> Any:
        engine.continue_as_new({"n": bad})

    assert refused(run_to_failure(engine, publishes))
    assert refused(run_to_failure(engine, starts_child))
    assert refused(run_to_failure(engine, continues, 1))
    assert [r.workflow for r in engine.list()].count("child") == 0
