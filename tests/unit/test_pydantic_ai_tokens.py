"""An agent's model request streams its text to the run's event stream while it runs (on a
SQLite file, in one process): batched by ``token_interval``, each delta marked with its
request and its attempt, before the request's one durable response; a retried request
streams again under another attempt; a writer that lost the lease writes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, DeltaToolCalls, FunctionModel
from raftflow.stores import streams

from raftflow import Engine, Retry
from raftflow.contrib.pydantic_ai import EVENTS_STREAM, RaftflowAgent

WORDS = [f"w{i} " for i in range(40)]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with Engine.from_url(f"sqlite:///{tmp_path / 'tokens.db'}") as engine:
        yield engine


def words_agent(name: str, fail_first_after: int | None = None) -> Agent[None, str]:
    """An agent whose model streams ``WORDS`` (the first attempt failing after so many)."""
    attempts: list[int] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        attempts.append(1)
        for i, word in enumerate(WORDS):
            if fail_first_after is not None and len(attempts) == 1 and i == fail_first_after:
                raise ConnectionError("the model's stream broke")
            yield word

    def whole(messages: list[ModelMessage], info: AgentInfo) -> Any:
        raise AssertionError("a streamed run does not ask for the whole response")

    return Agent(FunctionModel(whole, stream_function=stream), name=name)


def run(engine: Engine, durable: RaftflowAgent[None, str], execution_id: str) -> list[Any]:
    with engine.running_worker():
        assert durable.start("go", execution_id=execution_id).result(timeout=60)["output"] == (
            "".join(WORDS)
        )
    return list(engine.read_stream(execution_id, EVENTS_STREAM, follow=False))


def deltas(stream: list[Any]) -> list[Any]:
    return [value for value in stream if value["event"] == "text_delta"]


def test_the_text_is_streamed_before_the_response_marked_with_its_request(
    engine: Engine,
) -> None:
    durable = RaftflowAgent(words_agent("streamer"), engine, token_interval=0.0)
    stream = run(engine, durable, "streamed")
    found = deltas(stream)
    assert "".join(d["text"] for d in found) == "".join(WORDS)
    assert {(d["request"], d["attempt"]) for d in found} == {(0, found[0]["attempt"])}
    # Then the durable response, once, with the same request number.
    assert [v["event"] for v in stream[len(found) :]] == ["model_response"]
    assert stream[-1]["request"] == 0


def test_deltas_are_batched_per_interval(engine: Engine) -> None:
    # The first words are written at once; with a minute between writes, the rest waits
    # for the end of the response: two writes in all.
    durable = RaftflowAgent(words_agent("batcher"), engine, token_interval=60)
    found = deltas(run(engine, durable, "batched"))
    assert [d["text"] for d in found] == [WORDS[0], "".join(WORDS[1:])]


def test_without_an_interval_the_model_is_not_asked_to_stream(engine: Engine) -> None:
    calls: list[str] = []

    def whole(messages: list[ModelMessage], info: AgentInfo) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart

        calls.append("whole")
        return ModelResponse(parts=[TextPart("".join(WORDS))])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        calls.append("stream")
        yield "".join(WORDS)

    agent = Agent(FunctionModel(whole, stream_function=stream), name="quiet")
    durable = RaftflowAgent(agent, engine, token_interval=None)
    assert deltas(run(engine, durable, "quiet")) == []
    assert calls == ["whole"]


def test_a_retried_request_streams_again_under_another_attempt(engine: Engine) -> None:
    agent = words_agent("flaky", fail_first_after=5)
    retry = Retry(max_attempts=2, delay=0.01)
    durable = RaftflowAgent(agent, engine, model_retry=retry, token_interval=0.0)
    stream = run(engine, durable, "retried")
    attempts: dict[str, str] = {}
    for delta in deltas(stream):
        attempts[delta["attempt"]] = attempts.get(delta["attempt"], "") + delta["text"]
    assert list(attempts.values()) == ["".join(WORDS[:5]), "".join(WORDS)]
    assert [v["event"] for v in stream if v["event"] != "text_delta"] == ["model_response"]


def test_tool_calls_stream_no_text(engine: Engine) -> None:
    from pydantic_ai.models.function import DeltaToolCall

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        if len(messages) == 1:
            yield {0: DeltaToolCall("lookup", '{"key": "a"}', tool_call_id="c1")}
        else:
            yield "done"

    agent = Agent(FunctionModel(stream_function=stream), name="tooled")

    @agent.tool_plain
    def lookup(key: str) -> str:
        """The value of ``key``."""
        return f"value-of-{key}"

    durable = RaftflowAgent(agent, engine, token_interval=0.0)
    with engine.running_worker():
        assert durable.start("go", execution_id="tooled").result(timeout=60)["output"] == "done"
    stream_ = list(engine.read_stream("tooled", EVENTS_STREAM, follow=False))
    assert [(v["event"], v.get("request")) for v in stream_] == [
        ("model_response", 0),
        ("tool_result", None),
        ("text_delta", 1),
        ("model_response", 1),
    ]


def test_a_live_write_needs_the_executions_lease(engine: Engine) -> None:
    @engine.workflow
    def idle() -> None:
        return None

    engine.start(idle, execution_id="unleased")  # pending: no worker holds its lease
    written = engine.store.run(
        streams.write_live("unleased", "k", '"x"', lease_token="not-the-lease", now=0.0)
    )
    assert written is False
    assert list(engine.read_stream("unleased", "k", follow=False)) == []
