"""The durable primitives that only workflow code calls, part of :class:`~raftflow.Engine`.

Each call is recorded at its position (:mod:`raftflow.engine.workflow.primitives`) and
waits without holding a worker; in an async workflow, await its ``_async`` twin. The calls
that also work from client code (``start``, ``send``, ``cancel``, ``get_event``...) are
:mod:`raftflow.engine.client.calls`'s.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NoReturn

from raftflow.engine.workflow import primitives
from raftflow.engine.workflow.activation import ContinueAsNew
from raftflow.engine.workflow.context import current_activation, require_workflow
from raftflow.engine.workflow.drivers import adrive, drive
from raftflow.engine.workflow.steppath import StepFlow
from raftflow.engine.workflow.streams import StreamWrites
from raftflow.transports.payload import check_seconds, check_topic, to_json

from raftflow.errors import NotInWorkflowError

if TYPE_CHECKING:
    from raftflow.engine.workflow.activation import Activation


class DurableCalls(StreamWrites):
    """sleep, recv, set_event, patched, deprecate_patch, continue_as_new (module docstring);
    write_stream and close_stream (:mod:`raftflow.engine.workflow.streams`)."""

    max_payload_bytes: int

    def sleep(self, seconds: float) -> None:
        """Sleep durably: the wake time is recorded, the execution parks (no lease, no
        worker slot) and a replay after a crash sleeps only what remains."""
        seconds = seconds_of(seconds, "seconds")
        _run_sync(require_workflow("sleep", False), lambda run: primitives.sleep(run, seconds))

    async def sleep_async(self, seconds: float) -> None:
        """:meth:`sleep` in an async workflow."""
        seconds = seconds_of(seconds, "seconds")
        run = require_workflow("sleep", True)
        await adrive(run, primitives.sleep(run, seconds))

    def recv(self, topic: str | None = None, timeout: float | None = 60.0) -> Any:
        """The oldest unread message sent to this execution on ``topic``, waiting for one
        up to ``timeout`` seconds (None: for ever), durably; None if none came."""
        topic_, timeout = check_topic(topic), timeout_of(timeout)
        run = require_workflow("recv", False)
        return _run_sync(run, lambda run: primitives.recv(run, topic_, timeout))

    async def recv_async(self, topic: str | None = None, timeout: float | None = 60.0) -> Any:
        """:meth:`recv` in an async workflow."""
        topic_, timeout = check_topic(topic), timeout_of(timeout)
        run = require_workflow("recv", True)
        return await adrive(run, primitives.recv(run, topic_, timeout))

    def set_event(self, key: str, value: Any) -> None:
        """Publish ``value`` as this execution's event ``key`` (the latest value wins),
        for :meth:`get_event` callers: progress, intermediate results."""
        key = check_topic(key, what="event key")
        to_json(value, what="event value", limit=self.max_payload_bytes)
        run = require_workflow("set_event", False)
        _run_sync(run, lambda run: primitives.set_event(run, key, value))

    async def set_event_async(self, key: str, value: Any) -> None:
        """:meth:`set_event` in an async workflow."""
        key = check_topic(key, what="event key")
        to_json(value, what="event value", limit=self.max_payload_bytes)
        run = require_workflow("set_event", True)
        await adrive(run, primitives.set_event(run, key, value))

    def patched(self, patch: str) -> bool:
        """Change a running workflow's code safely: ``if engine.patched("fix-tax"):`` new
        code ``else:`` old code. True for runs that reach this point on code with the patch
        (recorded: their replays answer the same), False for runs already past it on older
        code (their history has another call here)."""
        patch = check_topic(patch, what="patch id")
        run = require_workflow("patched", False)
        return drive(run, primitives.patched(run, patch))

    async def patched_async(self, patch: str) -> bool:
        """:meth:`patched` in an async workflow."""
        patch = check_topic(patch, what="patch id")
        run = require_workflow("patched", True)
        return await adrive(run, primitives.patched(run, patch))

    def deprecate_patch(self, patch: str) -> None:
        """When no run from before a patch is left: remove the ``patched`` branch and its
        old path, and call this where ``patched`` was, so that runs that recorded the
        patch's marker still replay."""
        patch = check_topic(patch, what="patch id")
        run = require_workflow("deprecate_patch", False)
        _run_sync(run, lambda r: primitives.deprecate_patch(r, patch))

    async def deprecate_patch_async(self, patch: str) -> None:
        """:meth:`deprecate_patch` in an async workflow."""
        patch = check_topic(patch, what="patch id")
        run = require_workflow("deprecate_patch", True)
        await adrive(run, primitives.deprecate_patch(run, patch))

    def continue_as_new(self, input: Any = None) -> NoReturn:
        """End this run and start a fresh one of the same workflow, under the same
        execution id, with ``input`` and an empty history: for loops that never end. The
        run that ended stays inspectable (``handle.runs()``: ``"<id>#<run>"``, status
        ``continued``); signals not yet received and events carry over. Works in sync and
        async workflows alike (nothing to await: it raises)."""
        run = current_activation()
        if run is None:
            raise NotInWorkflowError("engine.continue_as_new() only works inside a workflow")
        payload = run.workflow.encode_input(input)
        text = to_json(payload, what="workflow input", limit=self.max_payload_bytes)
        raise ContinueAsNew(text)


def _run_sync(run: Activation, make: Any) -> Any:
    flow: StepFlow[Any] = make(run)
    return drive(run, flow)


def seconds_of(value: float, what: str) -> float:
    return check_seconds(value, what=what, allow_zero=True)


def timeout_of(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and math.isinf(value) and value > 0):
        return None
    return check_seconds(value, what="timeout", allow_zero=True)
