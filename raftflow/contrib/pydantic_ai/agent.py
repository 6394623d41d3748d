"""RaftflowAgent: a pydantic-ai agent whose runs are raftflow workflows.

As pydantic-ai's own durable integrations (Temporal, DBOS, Prefect) do, the wrapper swaps
the agent's model for a :class:`~raftflow.contrib.pydantic_ai.RaftflowModel` and its
toolsets for :class:`~raftflow.contrib.pydantic_ai.RaftflowToolset` s for the duration of a
run, inside a workflow registered under ``"<name>.run"``; the agent graph itself runs as
workflow code, replayed deterministically from the recorded steps. Tool calls run one after
the other (pydantic-ai's ``sequential`` mode), so their steps keep one recorded order.
"""

from __future__ import annotations

from typing import Any, Generic

import pydantic
import pydantic_core
from pydantic_ai.agent import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import Model
from pydantic_ai.output import OutputDataT
from pydantic_ai.tools import AgentDepsT

from raftflow.contrib.pydantic_ai.events import EVENTS_STREAM, EventWriter
from raftflow.contrib.pydantic_ai.model import RaftflowModel, request_model
from raftflow.contrib.pydantic_ai.tokens import TOKEN_INTERVAL
from raftflow.contrib.pydantic_ai.toolset import RaftflowToolset, call_tool
from raftflow.engine.app import Engine
from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.workflow.retry import Retry
from raftflow.transports.payload import check_seconds


class AgentRunInput(pydantic.BaseModel):
    """The input of an agent's workflow: the prompt and, to go on with a conversation,
    the earlier messages (pydantic-ai's JSON form, ``ModelMessagesTypeAdapter``)."""

    prompt: str | None = None
    message_history: list[dict[str, Any]] | None = None


class RaftflowAgent(Generic[AgentDepsT, OutputDataT]):
    """``agent`` made durable on ``engine``: its runs are executions of the workflow
    :attr:`workflow_name`, each model request and tool call a step.

    ``name`` (default: the agent's name) names the workflow and its steps, so it must stay
    the same across deploys; ``model_retry`` and ``tool_retry`` are the steps' retry
    policies (:class:`~raftflow.Retry`); ``event_stream`` the execution's stream that
    receives each model response and tool result (None: no stream), and, while a model
    request runs, its text deltas, written at most every ``token_interval`` seconds (None:
    the model is not asked to stream). The run's output is
    stored as JSON: :meth:`run` and :meth:`output` validate it back into the agent's
    output type. The agent's model must be set on the agent (a ``Model`` instance), and
    its dependencies are ``None``: a run's input must be JSON.
    """

    def __init__(
        self,
        agent: Agent[AgentDepsT, OutputDataT],
        engine: Engine,
        *,
        name: str | None = None,
        model_retry: Retry | None = None,
        tool_retry: Retry | None = None,
        event_stream: str | None = EVENTS_STREAM,
        token_interval: float | None = TOKEN_INTERVAL,
    ) -> None:
        name = name or agent.name
        if not name:
            raise UserError("a RaftflowAgent needs a name: Agent(name=...) or name=...")
        if not isinstance(agent.model, Model):
            raise UserError("a RaftflowAgent needs the agent's model set, as a Model instance")
        self.agent = agent
        self.engine = engine
        self.name = name
        events = EventWriter(engine, event_stream)
        model_step = engine.step(name=f"{name}.model_request", retry=model_retry)(request_model)
        tool_step = engine.step(name=f"{name}.tool_call", retry=tool_retry)(call_tool)
        if token_interval is not None:
            token_interval = check_seconds(token_interval, what="token_interval", allow_zero=True)
        self.model = RaftflowModel(agent.model, model_step, events, token_interval)
        self.toolsets = [RaftflowToolset(t, tool_step, events) for t in agent.toolsets]
        self._output = _output_adapter(agent.output_type)

        async def run_agent(request: AgentRunInput) -> dict[str, Any]:
            history = None
            if request.message_history is not None:
                history = ModelMessagesTypeAdapter.validate_python(request.message_history)
            with (
                agent.override(model=self.model, toolsets=self.toolsets, tools=[]),
                agent.parallel_tool_call_execution_mode("sequential"),
            ):
                result = await agent.run(request.prompt, message_history=history)
            await events.close()
            return {
                "output": pydantic_core.to_jsonable_python(result.output),
                "messages": ModelMessagesTypeAdapter.dump_python(
                    result.new_messages(), mode="json"
                ),
            }

        engine.workflow(name=self.workflow_name)(run_agent)
        self._workflow = run_agent

    @property
    def workflow_name(self) -> str:
        """The workflow a client starts by name: ``client.start(agent.workflow_name, ...)``."""
        return f"{self.name}.run"

    def start(
        self,
        prompt: str | None = None,
        *,
        message_history: list[ModelMessage] | None = None,
        execution_id: str | None = None,
    ) -> WorkflowHandle[dict[str, Any]]:
        """Start a run: an execution whose result is ``{"output", "messages"}`` (JSON)."""
        return self.engine.start(
            self._workflow, _input(prompt, message_history), execution_id=execution_id
        )

    def output(self, result: dict[str, Any]) -> OutputDataT:
        """The agent's output from an execution's result, in the agent's output type."""
        if self._output is None:
            return result["output"]  # type: ignore[no-any-return]
        output: OutputDataT = self._output.validate_python(result["output"])
        return output

    def run(
        self,
        prompt: str | None = None,
        *,
        message_history: list[ModelMessage] | None = None,
        execution_id: str | None = None,
        timeout: float | None = None,
    ) -> OutputDataT:
        """Start a run and wait for its output (a worker must be running)."""
        handle = self.start(prompt, message_history=message_history, execution_id=execution_id)
        return self.output(handle.result(timeout=timeout))


def _input(prompt: str | None, history: list[ModelMessage] | None) -> AgentRunInput:
    messages = None
    if history is not None:
        messages = ModelMessagesTypeAdapter.dump_python(history, mode="json")
    return AgentRunInput(prompt=prompt, message_history=messages)


def _output_adapter(output_type: Any) -> pydantic.TypeAdapter[Any] | None:
    """A validator of the output's JSON form when the output type is a plain type (a
    ``ToolOutput`` or a list of output types: None, and the JSON form is returned)."""
    try:
        return pydantic.TypeAdapter(output_type)
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError):
        return None
