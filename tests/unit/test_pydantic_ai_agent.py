"""raftflow.contrib.pydantic_ai on a SQLite file, in one process: a durable agent run gives
the plain agent's output, records each model request and tool call as a step (and each
response and result on the event stream), and a replay asks neither the model nor the tool
again. (tests/integration/test_agents.py kills a worker mid-run.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from raftflow import Engine, Status, WorkflowFailedError
from raftflow.contrib.pydantic_ai import EVENTS_STREAM, RaftflowAgent


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with Engine.from_url(f"sqlite:///{tmp_path / 'agents.db'}") as engine:
        yield engine


class Counted:
    """A model that asks for ``lookup`` twice then answers, and a ``lookup`` tool, both
    counting their calls."""

    def __init__(self, name: str = "counted") -> None:
        self.model_calls = 0
        self.tool_calls: list[str] = []
        self.agent = Agent(FunctionModel(self.answer), name=name)
        self.agent.tool_plain(self.lookup)

    def answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.model_calls += 1
        results = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if len(results) < 2:
            key = "ab"[len(results)]
            return ModelResponse(parts=[ToolCallPart("lookup", {"key": key}, f"call-{key}")])
        return ModelResponse(parts=[TextPart(" ".join(str(r) for r in results))])

    def lookup(self, key: str) -> str:
        """The value of ``key``."""
        self.tool_calls.append(key)
        return f"value-of-{key}"


def test_a_durable_run_gives_the_plain_agents_output(engine: Engine) -> None:
    plain = Counted()
    expected = plain.agent.run_sync("go").output
    counted = Counted()
    durable = RaftflowAgent(counted.agent, engine)
    with engine.running_worker():
        assert durable.run("go", timeout=60) == expected == "value-of-a value-of-b"
    assert (counted.model_calls, counted.tool_calls) == (3, ["a", "b"])


def test_each_model_request_and_tool_call_is_a_recorded_step(engine: Engine) -> None:
    counted = Counted()
    durable = RaftflowAgent(counted.agent, engine)
    with engine.running_worker():
        handle = durable.start("go", execution_id="steps")
        result = handle.result(timeout=60)
    steps = [s.name for s in handle.steps() if s.name != EVENTS_STREAM]
    assert steps == [
        "counted.model_request",
        "counted.tool_call",
        "counted.model_request",
        "counted.tool_call",
        "counted.model_request",
    ]
    assert all(s.status == "succeeded" for s in handle.steps())
    # The conversation comes back as JSON, readable by pydantic-ai.
    assert [m["kind"] for m in result["messages"]] == ["request", "response"] * 3
    events = list(engine.read_stream("steps", EVENTS_STREAM, follow=False))
    assert [e["event"] for e in events] == ["model_response", "tool_result"] * 2 + [
        "model_response"
    ]
    assert [e["result"] for e in events if e["event"] == "tool_result"] == [
        "value-of-a",
        "value-of-b",
    ]


def test_a_replayed_run_asks_neither_the_model_nor_the_tool_again(engine: Engine) -> None:
    counted = Counted()
    durable = RaftflowAgent(counted.agent, engine)
    with engine.running_worker():
        handle = durable.start("go", execution_id="replayed")
        first = handle.result(timeout=60)
    report = engine.replay("replayed")
    assert report.consistent, report
    # A fork from the last call re-runs the workflow code over the whole recorded history.
    with engine.running_worker():
        calls = len(handle.steps())
        fork = engine.fork("replayed", calls, new_execution_id="forked")
        assert fork.result(timeout=60)["output"] == first["output"]
    assert (counted.model_calls, counted.tool_calls) == (3, ["a", "b"])


def test_a_tool_asking_the_model_to_retry_is_recorded(engine: Engine) -> None:
    tries: list[int] = []
    agent = Agent(TestModel(call_tools=["flaky"]), name="retrying")

    @agent.tool_plain
    def flaky(n: int) -> str:
        """Fails once."""
        tries.append(n)
        if len(tries) == 1:
            raise ModelRetry("try again")
        return "fine"

    plain = [p.part_kind for m in agent.run_sync("go").all_messages() for p in m.parts]
    tries.clear()
    durable = RaftflowAgent(agent, engine)
    with engine.running_worker():
        handle = durable.start("go", execution_id="retry")
        result = handle.result(timeout=60)
    assert handle.status() is Status.SUCCEEDED
    assert len(tries) == 2
    # The model was told to retry, as without raftflow.
    assert [p["part_kind"] for m in result["messages"] for p in m["parts"]] == plain
    events = list(engine.read_stream("retry", EVENTS_STREAM, follow=False))
    assert [e.get("retry") for e in events if e["event"] == "tool_result"] == ["try again", None]


def test_an_agent_needs_a_name_and_a_model(engine: Engine) -> None:
    from pydantic_ai.exceptions import UserError

    with pytest.raises(UserError, match="name"):
        RaftflowAgent(Agent(TestModel()), engine)
    with pytest.raises(UserError, match="model"):
        RaftflowAgent(Agent(name="no-model"), engine)


def test_a_failing_tool_fails_the_run_once_recorded(engine: Engine) -> None:
    calls: list[str] = []
    agent = Agent(TestModel(call_tools=["broken"]), name="failing")

    @agent.tool_plain
    def broken(key: str) -> str:
        """Always fails."""
        calls.append(key)
        raise ValueError("the tool is broken")

    durable = RaftflowAgent(agent, engine)
    with engine.running_worker():
        handle = durable.start("go", execution_id="failing")
        with pytest.raises(WorkflowFailedError, match="the tool is broken"):
            handle.result(timeout=60)
    assert handle.status() is Status.FAILED
    assert len(calls) == 1  # a user code failure is recorded, not retried for ever
    assert [s.status for s in handle.steps() if s.name == "failing.tool_call"] == ["failed"]


def test_a_dynamic_toolsets_calls_are_steps_its_listing_is_workflow_code(engine: Engine) -> None:
    from pydantic_ai.toolsets import FunctionToolset

    listings: list[int] = []
    calls: list[str] = []
    agent = Agent(TestModel(call_tools=["dyn_lookup"]), name="dynamic")

    @agent.toolset
    def tools(ctx: Any) -> FunctionToolset[None]:
        listings.append(1)
        toolset: FunctionToolset[None] = FunctionToolset()

        @toolset.tool_plain
        def dyn_lookup(key: str) -> str:
            """The value of ``key``."""
            calls.append(key)
            return f"value-of-{key}"

        return toolset

    durable = RaftflowAgent(agent, engine)
    with engine.running_worker():
        handle = durable.start("go", execution_id="dynamic")
        first = handle.result(timeout=60)
        listed = len(listings)
        # A replay of the whole history: the tool is not called again, its listing runs again.
        fork = engine.fork("dynamic", len(handle.steps()), new_execution_id="dynamic-again")
        assert fork.result(timeout=60)["output"] == first["output"]
    assert [s.name for s in handle.steps()].count("dynamic.tool_call") == 1
    assert len(calls) == 1
    assert len(listings) > listed
