"""A durable pydantic-ai agent with one tool, for tests/integration/test_agents.py.

The model (a ``FunctionModel``: no network) asks for the tool twice, then answers. Each
model request and each tool call appends a line to a file in ``$RAFTFLOW_AGENT_DIR``, so a
test counts them across worker processes; the tool kills its own worker (SIGKILL) once,
on its second call, when the file ``kill-once`` is there (it is removed first)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from raftflow import Engine
from raftflow.contrib.pydantic_ai import RaftflowAgent

engine = Engine()


def _count(name: str) -> int:
    path = Path(os.environ["RAFTFLOW_AGENT_DIR"]) / name
    with path.open("a") as file:
        file.write("x\n")
    return len(path.read_text().splitlines())


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    _count("model-calls")
    results = [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    if len(results) < 2:
        key = "ab"[len(results)]
        return ModelResponse(parts=[ToolCallPart("lookup", {"key": key}, f"call-{key}")])
    return ModelResponse(parts=[TextPart(" ".join(str(r) for r in results))])


agent = Agent(FunctionModel(answer), name="librarian")


@agent.tool_plain
def lookup(key: str) -> str:
    """The value of ``key``."""
    calls = _count("tool-calls")
    marker = Path(os.environ["RAFTFLOW_AGENT_DIR"]) / "kill-once"
    if calls == 2 and marker.exists():
        marker.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return f"value-of-{key}"


librarian = RaftflowAgent(agent, engine)
