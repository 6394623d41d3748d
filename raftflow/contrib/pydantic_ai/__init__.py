"""Durable pydantic-ai agents: :class:`RaftflowAgent` (``pip install 'raftflow[ai]'``).

``RaftflowAgent(agent, engine)`` registers the agent's run as a workflow; each model
request and each tool call of a run is a step, recorded as JSON, so a run resumed by
another worker returns the recorded responses and results instead of asking the model or
calling the tool again. See docs/guides/agents.md.
"""

from raftflow.contrib.pydantic_ai.agent import AgentRunInput, RaftflowAgent
from raftflow.contrib.pydantic_ai.events import EVENTS_STREAM
from raftflow.contrib.pydantic_ai.model import RaftflowModel
from raftflow.contrib.pydantic_ai.toolset import RaftflowToolset

__all__ = ["EVENTS_STREAM", "AgentRunInput", "RaftflowAgent", "RaftflowModel", "RaftflowToolset"]
