"""The agent's model, each request a durable step (its response recorded as JSON)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pydantic
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from raftflow.contrib.pydantic_ai.events import EventWriter
from raftflow.contrib.pydantic_ai.tokens import TokenStream, streamed_request
from raftflow.engine.workflow.context import current_activation

RESPONSE: pydantic.TypeAdapter[ModelResponse] = pydantic.TypeAdapter(ModelResponse)

#: The durable step that asks the wrapped model: (messages, settings, parameters, where its
#: text streams) -> JSON.
RequestStep = Callable[
    [Model, list[ModelMessage], ModelSettings | None, ModelRequestParameters, TokenStream | None],
    Awaitable[dict[str, Any]],
]


async def request_model(
    model: Model,
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    tokens: TokenStream | None = None,
) -> dict[str, Any]:
    """One request to ``model``, its response as JSON (the step's recorded result);
    streamed, its text written live to ``tokens`` as it comes, when given."""
    if tokens is None:
        response = await model.request(messages, model_settings, parameters)
    else:
        writer = tokens.writer()
        response = await streamed_request(model, messages, model_settings, parameters, writer)
    data: dict[str, Any] = RESPONSE.dump_python(response, mode="json")
    return data


class RaftflowModel(WrapperModel):
    """``wrapped``, whose requests made in a workflow are steps: a replayed request returns
    the recorded response without asking the model. Outside a workflow it is ``wrapped``.
    ``token_interval`` (seconds; None: no streaming): a request streams its text to the
    event stream while it runs, a write at most that often (tokens.py beside this)."""

    def __init__(
        self,
        wrapped: Model,
        step: RequestStep,
        events: EventWriter,
        token_interval: float | None = None,
    ) -> None:
        super().__init__(wrapped)
        self._step = step
        self._events = events
        self._token_interval = token_interval

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        run = current_activation()
        if run is None:
            return await self.wrapped.request(messages, model_settings, model_request_parameters)
        # The request's number in the conversation: its text deltas and its response say it.
        number = sum(isinstance(message, ModelResponse) for message in messages)
        tokens = None
        if self._events.key is not None and self._token_interval is not None:
            tokens = TokenStream(run, self._events.key, number, self._token_interval)
        data = await self._step(
            self.wrapped, messages, model_settings, model_request_parameters, tokens
        )
        await self._events.model_response(number, data)
        return RESPONSE.validate_python(data)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        if current_activation() is not None:
            raise UserError(
                "a streamed model request is not durable in a raftflow workflow: run the agent "
                "with RaftflowAgent.run/start (each response goes to the run's event stream)"
            )
        async with self.wrapped.request_stream(
            messages, model_settings, model_request_parameters, run_context
        ) as streamed:
            yield streamed
