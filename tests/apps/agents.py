"""A durable pydantic-ai agent with one tool, for tests/integration/test_agents.py.

The model (a ``FunctionModel``: no network) asks for the tool twice, then answers, its
answer streamed word by word. Each model request and each tool call appends a line to a
file in ``$RAFTFLOW_AGENT_DIR``, so a test counts them across worker processes; the tool
kills its own worker (SIGKILL) once, on its second call, when the file ``kill-once`` is
there (it is removed first); the answer's stream does so, once its first words are on the
run's stream, when the file ``kill-in-stream`` is there."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from raftflow import Engine, current_step
from raftflow.contrib.pydantic_ai import EVENTS_STREAM, RaftflowAgent

engine = Engine()


def _count(name: str) -> int:
    path = Path(os.environ["RAFTFLOW_AGENT_DIR"]) / name
    with path.open("a") as file:
        file.write("x\n")
    return len(path.read_text().splitlines())


def _results(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    _count("model-calls")
    results = _results(messages)
    if len(results) < 2:
        key = "ab"[len(results)]
        return ModelResponse(parts=[ToolCallPart("lookup", {"key": key}, f"call-{key}")])
    return ModelResponse(parts=[TextPart(" ".join(results))])


async def stream_answer(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """``answer``, streamed: the tool calls whole, the answer a word at a time."""
    _count("model-calls")
    results = _results(messages)
    if len(results) < 2:
        key = "ab"[len(results)]
        args = json.dumps({"key": key})
        yield {0: DeltaToolCall("lookup", args, tool_call_id=f"call-{key}")}
        return
    words = " ".join(results).split(" ")
    for i, word in enumerate(words):
        yield word if i == 0 else f" {word}"
        marker = Path(os.environ["RAFTFLOW_AGENT_DIR"]) / "kill-in-stream"
        if i == 0 and marker.exists():
            marker.unlink()
            await _until_streamed(current_step().execution_id)
            os.kill(os.getpid(), signal.SIGKILL)
        await asyncio.sleep(0.05)


async def _until_streamed(execution_id: str) -> None:
    """Until the run's stream holds a text delta (the first words, written live)."""
    while True:
        async for value in engine.read_stream_async(execution_id, EVENTS_STREAM, follow=False):
            if value["event"] == "text_delta":
                return
        await asyncio.sleep(0.02)


agent = Agent(FunctionModel(answer, stream_function=stream_answer), name="librarian")


@agent.tool_plain
def lookup(key: str) -> str:
    """The value of ``key``."""
    calls = _count("tool-calls")
    marker = Path(os.environ["RAFTFLOW_AGENT_DIR"]) / "kill-once"
    if calls == 2 and marker.exists():
        marker.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return f"value-of-{key}"


librarian = RaftflowAgent(agent, engine, token_interval=0.02)
