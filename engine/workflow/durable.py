"""The durable primitives' public API, part of :class:`~raftflow.engine.app.Engine`.

Inside a workflow each call is recorded at its position (:mod:`raftflow.engine.workflow.primitives`)
and waits without holding a worker; in an async workflow, await its ``_async`` twin.
``send``, ``cancel`` and ``get_event`` also work from anywhere else (client code).
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from typing import TYPE_CHECKING, Any, NoReturn

from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.workflow import primitives
from raftflow.engine.workflow.activation import ContinueAsNew
from raftflow.engine.workflow.context import current_activation
from raftflow.engine.workflow.drivers import adrive, drive
from raftflow.engine.workflow.events import RUN
from raftflow.engine.workflow.steppath import StepFlow
from raftflow.stores.contract import Status
from raftflow.transports.payload import check_id, check_seconds, check_topic, to_json

from raftflow.errors import NotInWorkflowError, ResultTimeoutError

if TYPE_CHECKING:
    from raftflow.engine.workflow.activation import Activation
    from raftflow.stores.store import SqlStore


class DurableCalls:
    """sleep, recv, send, set_event / get_event, cancel: see the module docstring."""

    max_payload_bytes: int

    @property
    def store(self) -> SqlStore:
        raise NotImplementedError  # Engine's

    # -- in workflows only ----------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """Sleep durably: the wake time is recorded, the execution parks (no lease, no
        worker slot) and a replay after a crash sleeps only what remains."""
        seconds = _seconds(seconds, "seconds")
        _run_sync(self._workflow("sleep", False), lambda run: primitives.sleep(run, seconds))

    async def sleep_async(self, seconds: float) -> None:
        """:meth:`sleep` in an async workflow."""
        seconds = _seconds(seconds, "seconds")
        run = self._workflow("sleep", True)
        await adrive(run, primitives.sleep(run, seconds))

    def recv(self, topic: str | None = None, timeout: float | None = 60.0) -> Any:
        """The oldest unread message sent to this execution on ``topic``, waiting for one
        up to ``timeout`` seconds (None: for ever), durably; None if none came."""
        topic_, timeout = check_topic(topic), _timeout(timeout)
        run = self._workflow("recv", False)
        return _run_sync(run, lambda run: primitives.recv(run, topic_, timeout))

    async def recv_async(self, topic: str | None = None, timeout: float | None = 60.0) -> Any:
        """:meth:`recv` in an async workflow."""
        topic_, timeout = check_topic(topic), _timeout(timeout)
        run = self._workflow("recv", True)
        return await adrive(run, primitives.recv(run, topic_, timeout))

    def set_event(self, key: str, value: Any) -> None:
        """Publish ``value`` as this execution's event ``key`` (the latest value wins),
        for :meth:`get_event` callers: progress, intermediate results."""
        key = check_topic(key, what="event key")
        to_json(value, what="event value", limit=self.max_payload_bytes)
        run = self._workflow("set_event", False)
        _run_sync(run, lambda run: primitives.set_event(run, key, value))

    async def set_event_async(self, key: str, value: Any) -> None:
        """:meth:`set_event` in an async workflow."""
        key = check_topic(key, what="event key")
        to_json(value, what="event value", limit=self.max_payload_bytes)
        run = self._workflow("set_event", True)
        await adrive(run, primitives.set_event(run, key, value))

    def patched(self, patch: str) -> bool:
        """Change a running workflow's code safely: ``if engine.patched("fix-tax"):`` new
        code ``else:`` old code. True for runs that reach this point on code with the patch
        (recorded: their replays answer the same), False for runs already past it on older
        code (their history has another call here)."""
        patch = check_topic(patch, what="patch id")
        run = self._workflow("patched", False)
        return drive(run, primitives.patched(run, patch))

    async def patched_async(self, patch: str) -> bool:
        """:meth:`patched` in an async workflow."""
        patch = check_topic(patch, what="patch id")
        run = self._workflow("patched", True)
        return await adrive(run, primitives.patched(run, patch))

    def deprecate_patch(self, patch: str) -> None:
        """When no run from before a patch is left: remove the ``patched`` branch and its
        old path, and call this where ``patched`` was, so that runs that recorded the
        patch's marker still replay."""
        patch = check_topic(patch, what="patch id")
        run = self._workflow("deprecate_patch", False)
        _run_sync(run, lambda r: primitives.deprecate_patch(r, patch))

    async def deprecate_patch_async(self, patch: str) -> None:
        """:meth:`deprecate_patch` in an async workflow."""
        patch = check_topic(patch, what="patch id")
        run = self._workflow("deprecate_patch", True)
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

    # -- anywhere -------------------------------------------------------------------------

    def send(
        self, execution_id: str, message: Any, topic: str | None = None, key: str | None = None
    ) -> None:
        """Send ``message`` (JSON) to an execution, for its ``recv(topic)``. From client
        code, ``key`` makes a retried send idempotent; in a workflow the send is recorded
        like a step and never sent twice. :class:`ExecutionNotFoundError` or
        :class:`ExecutionFinishedError` when nothing could receive it (nothing is stored)."""
        check_id(execution_id, what="execution_id")
        topic_ = check_topic(topic)
        to_json(message, what="message", limit=self.max_payload_bytes)
        run = self._maybe_workflow("send", False)
        if run is None:
            self.store.database.run(self.store.flows.send(execution_id, message, topic_, key))
            return
        _run_sync(run, lambda run: primitives.send(run, execution_id, message, topic_, key))

    async def send_async(
        self, execution_id: str, message: Any, topic: str | None = None, key: str | None = None
    ) -> None:
        """:meth:`send`, awaited (in an async workflow, or async client code)."""
        check_id(execution_id, what="execution_id")
        topic_ = check_topic(topic)
        to_json(message, what="message", limit=self.max_payload_bytes)
        run = self._maybe_workflow("send", True)
        if run is None:
            await asyncio.to_thread(self.send, execution_id, message, topic, key)
            return
        await adrive(run, primitives.send(run, execution_id, message, topic_, key))

    def cancel(self, execution_id: str) -> Status:
        """Cancel an execution: it stops at its next step boundary (a running step
        finishes and is recorded; no further step starts), its status becomes
        ``cancelled``, its children are cancelled with it. A finished execution is left
        as it is. Returns the status it had when the cancel was written."""
        check_id(execution_id, what="execution_id")
        return self.store.database.run(self.store.flows.cancel(execution_id))

    async def cancel_async(self, execution_id: str) -> Status:
        """:meth:`cancel`, awaited."""
        return await asyncio.to_thread(self.cancel, execution_id)

    def resume(self, execution_id: str) -> bool:
        """Run a failed or cancelled execution again from its last recorded step, on the
        code deployed now (the step that failed it runs again; the steps before it are
        replayed from their records). False, and nothing changes, for any other status."""
        check_id(execution_id, what="execution_id")
        return self.store.database.run(self.store.flows.resume(execution_id, RUN))

    def fork(
        self, execution_id: str, from_step: int, *, new_execution_id: str | None = None
    ) -> WorkflowHandle[Any]:
        """Start a new execution of the same workflow and input that reuses the recorded
        results of ``execution_id``'s calls ``0 .. from_step - 1`` (their functions are not
        called) and runs from call ``from_step`` on the code deployed now: fix the bug,
        then run again from the step that failed. Idempotent by ``new_execution_id``."""
        new_id = new_execution_id or uuid.uuid4().hex
        self.store.database.run(self.store.flows.fork(execution_id, from_step, new_id, RUN))
        return WorkflowHandle(self, new_id)  # type: ignore[arg-type]

    def get_event(self, execution_id: str, key: str, timeout: float = 0.0) -> Any:
        """The latest value of an execution's event ``key``, waiting up to ``timeout``
        seconds for the first; :class:`ResultTimeoutError` if there is none by then.
        Not for workflow code (its result would not be recorded): use ``recv`` there."""
        if current_activation() is not None:
            raise NotInWorkflowError("get_event() is for client code; a workflow uses recv()")
        check_id(execution_id, what="execution_id")
        key = check_topic(key, what="event key")
        deadline = time.monotonic() + _seconds(timeout, "timeout")
        delay = 0.01
        while True:
            found, value = self.store.database.run(self.store.flows.get_event(execution_id, key))
            if found:
                return value
            if time.monotonic() >= deadline:
                raise ResultTimeoutError(f"execution {execution_id!r} has no event {key!r}")
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 1.5, 0.25)

    async def get_event_async(self, execution_id: str, key: str, timeout: float = 0.0) -> Any:
        """:meth:`get_event`, awaited."""
        return await asyncio.to_thread(self.get_event, execution_id, key, timeout)

    # -- where are we ---------------------------------------------------------------------

    def _workflow(self, what: str, is_async: bool) -> Activation:
        run = self._maybe_workflow(what, is_async)
        if run is None:
            raise NotInWorkflowError(f"engine.{what}() only works inside a workflow")
        return run

    @staticmethod
    def _maybe_workflow(what: str, is_async: bool) -> Activation | None:
        run = current_activation()
        if run is not None and run.is_async != is_async:
            hint = f"await engine.{what}_async(...)" if run.is_async else f"engine.{what}(...)"
            kind = "an async" if run.is_async else "a sync"
            raise NotInWorkflowError(f"this is {kind} workflow: call {hint}")
        return run


def _run_sync(run: Activation, make: Any) -> Any:
    flow: StepFlow[Any] = make(run)
    return drive(run, flow)


def _seconds(value: float, what: str) -> float:
    return check_seconds(value, what=what, allow_zero=True)


def _timeout(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and math.isinf(value) and value > 0):
        return None
    return check_seconds(value, what="timeout", allow_zero=True)
