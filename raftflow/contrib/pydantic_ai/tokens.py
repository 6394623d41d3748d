"""A model request's text, streamed live to the run's event stream while the request runs.

The model request step asks the model for a streamed response and appends its text
deltas to the stream, batched: a write (one request, one Raft entry) at most every
``interval`` seconds and one at the end, with one write in flight at a time (the text
that comes meanwhile waits for the next). Each value is
``{"event": "text_delta", "request": n, "attempt": id, "text": "..."}``: ``request`` is
the model request's number in the conversation (its ``model_response`` event has it too),
``attempt`` names this run of the step.

These writes are live, not recorded calls (:func:`raftflow.stores.streams.write_live`):
written only while the step's worker holds the execution's lease, and never again by a
replay (a recorded request is not made again). But a step run again -- a retry, or a
worker killed mid-request -- streams its text again, under another ``attempt``: a reader
keeps the deltas of the latest attempt of each request, and the ``model_response`` event,
written exactly once, is the response. A delta write that fails is logged and dropped:
the stream misses some text, never the response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.settings import ModelSettings

from raftflow.engine.workflow.activation import Activation
from raftflow.stores import streams
from raftflow.transports.payload import to_json

log = logging.getLogger("raftflow.contrib.pydantic_ai")

#: Seconds between two writes of a request's text deltas (each one Raft entry).
TOKEN_INTERVAL = 0.25


@dataclass(frozen=True)
class TokenStream:
    """Where one model request streams its text: the stream ``key`` of the execution that
    ``run`` runs, as request number ``request``. Made by workflow code, used by the step."""

    run: Activation
    key: str
    request: int
    interval: float = TOKEN_INTERVAL

    def writer(self) -> TokenWriter:
        """The writer of one attempt of the request (each has its own ``attempt`` id)."""
        return TokenWriter(self)


@dataclass
class TokenWriter:
    """Streams the text of one attempt of a model request, in batches."""

    stream: TokenStream
    attempt: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _text: list[str] = field(default_factory=list)
    _writing: asyncio.Task[None] | None = None
    _next_at: float = 0.0
    _refused: bool = False

    def add(self, text: str) -> None:
        """Some text of the response: written with the next batch."""
        if not text or self._refused:
            return
        self._text.append(text)
        if self._writing is None and time.monotonic() >= self._next_at:
            self._write_batch()

    async def finish(self) -> None:
        """The response is complete: write what is left (after the write in flight)."""
        if self._writing is not None:
            await self._writing
        if self._text and not self._refused:
            self._write_batch()
            if self._writing is not None:
                await self._writing

    async def abandon(self) -> None:
        """The request failed: let the write in flight end, drop the rest."""
        self._text.clear()
        if self._writing is not None:
            with contextlib.suppress(Exception):
                await self._writing

    def _write_batch(self) -> None:
        text, self._text = "".join(self._text), []
        self._next_at = time.monotonic() + self.stream.interval
        self._writing = asyncio.ensure_future(self._write(text))

    async def _write(self, text: str) -> None:
        stream = self.stream
        run = stream.run
        value = {"event": "text_delta", "request": stream.request, "attempt": self.attempt}
        try:
            flow = streams.write_live(
                run.execution_id,
                stream.key,
                to_json({**value, "text": text}, what="text delta"),
                lease_token=run.lease.token,
                now=run.host.clock_estimate(),
            )
            if not await run.host.run_flow(flow):
                self._refused = True  # the lease is lost, or the stream closed or full
        except Exception as exc:
            log.warning("execution %s: a text delta was dropped: %s", run.execution_id, exc)
        finally:
            self._writing = None


async def streamed_request(
    model: Model,
    messages: list[ModelMessage],
    model_settings: ModelSettings | None,
    parameters: ModelRequestParameters,
    writer: TokenWriter,
) -> ModelResponse:
    """One request to ``model``, streamed: its text to ``writer`` as it comes, its whole
    response returned. A model that does not stream is asked for the whole response."""
    if isinstance(model, FunctionModel) and model.stream_function is None:
        return await model.request(messages, model_settings, parameters)
    async with contextlib.AsyncExitStack() as stack:
        try:
            streamed = await stack.enter_async_context(
                model.request_stream(messages, model_settings, parameters)
            )
        except NotImplementedError:
            return await model.request(messages, model_settings, parameters)
        try:
            async for event in streamed:
                writer.add(_text_of(event))
        except BaseException:
            await writer.abandon()
            raise
        await writer.finish()
        return streamed.get()
    raise AssertionError("unreachable")  # pragma: no cover - the block returns or raises


def _text_of(event: ModelResponseStreamEvent) -> str:
    """The text an event of a streamed response adds (none for tool calls, thinking...)."""
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return ""
