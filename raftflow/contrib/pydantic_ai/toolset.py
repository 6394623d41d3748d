"""The agent's toolsets, each tool call a durable step (its result recorded as JSON).

A tool's result is recorded as its JSON form (``pydantic_core.to_jsonable_python``), and
that form is what the agent gets, on the first run as on a replay, so both see the same
value. A :class:`~pydantic_ai.ModelRetry` raised by the tool is recorded too, and raised
again on a replay: the model is asked to retry, as without raftflow.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pydantic_core
from pydantic_ai.exceptions import ModelRetry
from pydantic_ai.tools import AgentDepsT, RunContext
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset

from raftflow.contrib.pydantic_ai.events import EventWriter
from raftflow.engine.workflow.context import current_activation

#: The durable step that calls a tool: (toolset, name, args, ctx, tool) -> its outcome.
ToolStep = Callable[
    [AbstractToolset[Any], str, dict[str, Any], RunContext[Any], ToolsetTool[Any]],
    Awaitable[dict[str, Any]],
]


async def call_tool(
    toolset: AbstractToolset[Any],
    name: str,
    tool_args: dict[str, Any],
    ctx: RunContext[Any],
    tool: ToolsetTool[Any],
) -> dict[str, Any]:
    """Call the tool; its outcome as JSON: ``{"result": ...}`` or ``{"retry": message}``."""
    try:
        result = await toolset.call_tool(name, tool_args, ctx, tool)
    except ModelRetry as exc:
        return {"retry": exc.message}
    return {"result": pydantic_core.to_jsonable_python(result)}


@dataclass
class RaftflowToolset(WrapperToolset[AgentDepsT]):
    """``wrapped``, whose tool calls made in a workflow are steps: a replayed call returns
    the recorded result without calling the tool. Outside a workflow it is ``wrapped``.
    (A dataclass, as its base: pydantic-ai copies it with another ``wrapped`` for each run
    step of a dynamic toolset.)"""

    step: ToolStep
    events: EventWriter

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[AgentDepsT]], AbstractToolset[AgentDepsT]]
    ) -> AbstractToolset[AgentDepsT]:
        return self  # its calls are steps: the wrapped toolset is not swapped out under it

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        if current_activation() is None:
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        outcome = await self.step(self.wrapped, name, tool_args, ctx, tool)
        await self.events.tool_result(name, ctx.tool_call_id, outcome)
        if "retry" in outcome:
            raise ModelRetry(str(outcome["retry"]))
        return outcome["result"]
