"""The dashboard's live streams: ``GET /api/stream?id=ID&key=KEY`` sends the values of an
execution's durable stream as server-sent events, following it until it is closed or the
execution ends (the execution page's script shows them as they come: static/live.js).

Each event's ``id`` is the position after its value, so a browser that reconnects (``EventSource``
does, sending ``Last-Event-ID``) goes on after the last value it got, never twice; a last
``end`` event tells it to stop. It is a GET like every page: it passes the Host allow-list
and the sign-in of :mod:`.guard`, and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from raftflow.stores.streams import check_read
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from raftflow.engine.app import Engine


def stream_routes(engine: Engine) -> list[Route]:
    """The route of the server-sent events of streams."""

    async def stream(request: Request) -> Response:
        q = request.query_params
        execution_id, key = q.get("id"), q.get("key")
        if not execution_id or key is None:
            raise HTTPException(400, "id and key are required")
        offset = _offset(request.headers.get("last-event-id") or q.get("offset") or "0")
        check_read(execution_id, key, offset)  # before the response starts: a 400, not a cut
        if await run_in_threadpool(engine.store_of(execution_id).get, execution_id) is None:
            raise HTTPException(404, f"no execution has id {execution_id!r}")
        values = engine.read_stream_async(execution_id, key, offset, follow=True)
        return StreamingResponse(
            _events(values, offset),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return [Route("/api/stream", stream)]


def _offset(text: str) -> int:
    """The position to start at: a ``Last-Event-ID`` or the ``offset`` parameter."""
    try:
        return int(text)
    except ValueError:
        raise HTTPException(400, f"offset must be a whole number, not {text[:40]!r}") from None


async def _events(values: AsyncIterator[Any], offset: int) -> AsyncIterator[str]:
    """Each value as an event whose id is the position after it (where a reconnection
    resumes), then ``end``."""
    position = offset
    async for value in values:
        position += 1
        yield f"id: {position}\ndata: {json.dumps(value, separators=(',', ':'))}\n\n"
    yield "event: end\ndata: {}\n\n"
