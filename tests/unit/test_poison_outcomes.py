"""An outcome that cannot be stored as it is is user code's failure, recorded once.

An exception whose message holds a lone surrogate (a file name decoded with
surrogateescape), an exception whose ``__str__`` raises, a result nested deeper than the
serializer goes: each becomes the step's or the workflow's recorded error, with a readable
rendering of the message, and the step that produced it never runs again. (Before, the
failed encoding was taken for an infrastructure failure: the execution was handed back
and the step re-ran every few seconds for ever.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from raftflow import Engine, Retry, Status, WorkflowFailedError

#: A file name that is not valid UTF-8, as ``os.listdir`` returns it (surrogateescape).
NAME = b"caf\xe9.txt".decode("utf-8", "surrogateescape")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def deep() -> Any:
    value: Any = []
    for _ in range(300):
        value = [value]
    return value


def surrogate_error() -> Any:
    raise OSError(f"cannot open {NAME}")


def unprintable_error() -> Any:
    raise Unprintable()


#: What the poison does, and what the recorded message must say of it (one of).
POISONS: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
    "surrogate-message": (surrogate_error, ("cannot open caf\\udce9.txt",)),
    "unprintable-message": (unprintable_error, ("str() of the exception failed",)),
    "nested-too-deep": (deep, ("depth", "deeply")),
    "surrogate-result": (lambda: NAME, ("surrogates not allowed",)),
}


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'poison.db'}")
    yield engine
    engine.close()


def define(
    engine: Engine, kind: str, where: str, poison: Callable[[], Any]
) -> tuple[Any, list[int]]:
    """A workflow that runs a step with a side effect, and whose step (``where="step"``)
    or itself (``"workflow"``) then produces ``poison``."""
    runs: list[int] = []

    if kind == "sync":

        @engine.step
        def effect() -> Any:
            runs.append(1)
            return poison() if where == "step" else len(runs)

        @engine.workflow
        def wf() -> Any:
            effect()
            return poison()

    else:

        @engine.step
        async def effect() -> Any:
            runs.append(1)
            return poison() if where == "step" else len(runs)

        @engine.workflow
        async def wf() -> Any:
            await effect()
            return poison()

    return wf, runs


@pytest.mark.parametrize("poison", sorted(POISONS))
@pytest.mark.parametrize("where", ["step", "workflow"])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_an_outcome_that_cannot_be_encoded_is_the_recorded_error(
    engine: Engine, kind: str, where: str, poison: str
) -> None:
    produce, shown = POISONS[poison]
    wf, runs = define(engine, kind, where, produce)
    handle = engine.start(wf)
    with engine.running_worker(), pytest.raises(WorkflowFailedError) as caught:
        handle.result(timeout=10)
    assert handle.status() is Status.FAILED
    assert runs == [1]  # the step's side effect happened once: nothing re-ran it
    message = caught.value.error.message
    assert any(text in message for text in shown), message
    message.encode("utf-8")  # stored and shown as valid text
    (step,) = handle.steps()
    assert step.succeeded is (where == "workflow")
    if where == "step":
        assert step.error is not None and step.error.message in message


def test_a_retried_attempts_unencodable_message_is_recorded_in_its_history(
    engine: Engine,
) -> None:
    attempts: list[int] = []

    @engine.step(retry=Retry(max_attempts=2, delay=0.01))
    def opens() -> None:
        attempts.append(1)
        surrogate_error()

    @engine.workflow
    def wf() -> None:
        opens()

    handle = engine.start(wf)
    with engine.running_worker(), pytest.raises(WorkflowFailedError, match=r"caf\\udce9"):
        handle.result(timeout=10)
    assert attempts == [1, 1]
    (step,) = handle.steps()
    assert [a.message for a in step.history] == ["cannot open caf\\udce9.txt"]
