"""The run's events on a durable stream: one value per model response and per tool result.

Written from workflow code after each step, so each is appended exactly once however often
the run is replayed (:meth:`raftflow.Engine.write_stream`). The text deltas a model request
streams while it runs go to the same stream, but live, from the step (tokens.py beside
this): not exactly once.
"""

from __future__ import annotations

from typing import Any

from raftflow.engine.app import Engine

#: The stream key a :class:`~raftflow.contrib.pydantic_ai.RaftflowAgent` writes to by default.
EVENTS_STREAM = "agent-events"


class EventWriter:
    """Appends a run's events to the stream ``key`` of the running execution (or to none)."""

    def __init__(self, engine: Engine, key: str | None) -> None:
        self.engine = engine
        self.key = key

    async def model_response(self, request: int, response: dict[str, Any]) -> None:
        await self._write({"event": "model_response", "request": request, "response": response})

    async def tool_result(self, tool_name: str, tool_call_id: str | None, outcome: Any) -> None:
        event = {"event": "tool_result", "tool_name": tool_name, "tool_call_id": tool_call_id}
        await self._write({**event, **outcome})

    async def close(self) -> None:
        if self.key is not None:
            await self.engine.close_stream_async(self.key)

    async def _write(self, value: dict[str, Any]) -> None:
        if self.key is not None:
            await self.engine.write_stream_async(self.key, value)
