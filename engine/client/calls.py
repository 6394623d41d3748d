"""The client face, part of :class:`~raftflow.Engine`: start executions, then follow and
steer them -- get, list, send, cancel, resume, fork, events, schedules -- from any process.

Every call here goes to the store (one request each, unless it says otherwise). Called
from workflow code, ``start`` starts a child and ``send`` sends a recorded message: both
are durable calls of the workflow (:mod:`raftflow.engine.workflow.primitives`).
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import time
import uuid
from typing import TYPE_CHECKING, Any, TypeVar, overload

from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.client.replay import ReplayReport, replay
from raftflow.engine.runtime.hooks import HookChain, Hooks
from raftflow.engine.runtime.local import LocalWorkers
from raftflow.engine.runtime.schedules import ScheduleFlows, ScheduleInfo
from raftflow.engine.workflow import primitives
from raftflow.engine.workflow.context import current_activation, workflow_run
from raftflow.engine.workflow.drivers import adrive, drive
from raftflow.engine.workflow.durable import seconds_of
from raftflow.engine.workflow.events import RUN
from raftflow.engine.workflow.registry import Registry
from raftflow.engine.workflow.schedule import check_execution_id
from raftflow.stores.records import Claimed, ExecutionRecord, Status
from raftflow.transports.contract import Lease
from raftflow.transports.payload import (
    check_id,
    check_priority,
    check_seconds,
    check_topic,
    to_json,
)

from raftflow.errors import (
    ExecutionConflictError,
    ExecutionNotFoundError,
    InvalidArgumentError,
    NotInWorkflowError,
    ResultTimeoutError,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from raftflow.stores.store import SqlStore

T = TypeVar("T")


class ClientCalls:
    """start, get, list, send, cancel, resume, fork, get_event, schedules."""

    registry: Registry
    hooks: list[Hooks]
    #: The workers this engine runs in this process (the start fast path: runtime/local.py).
    local: LocalWorkers
    max_payload_bytes: int
    max_history: int

    @property
    def store(self) -> SqlStore:
        raise NotImplementedError  # the Engine's

    # -- start ----------------------------------------------------------------------------

    @overload
    def start(
        self,
        workflow: Callable[..., Coroutine[Any, Any, T]],
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
        debounce: float | None = None,
    ) -> WorkflowHandle[T]: ...

    @overload
    def start(
        self,
        workflow: Callable[..., T],
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
        debounce: float | None = None,
    ) -> WorkflowHandle[T]: ...

    @overload
    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
        debounce: float | None = None,
    ) -> WorkflowHandle[Any]: ...

    def start(
        self,
        workflow: Any,
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
        debounce: float | None = None,
    ) -> WorkflowHandle[Any]:
        """Start an execution of ``workflow`` (a registered function or its name).

        The input is validated against the workflow's annotation here (nothing is written
        when it fails). With ``execution_id`` the call is idempotent: an execution that
        exists is returned as it is (``handle.created`` is False). ``priority`` (0-4) is
        the queue priority; workers with ``min_priority`` only take executions at or above.
        One request: the execution's record and its first event are written atomically.

        Inside a workflow this starts a *child*, recorded like a step (its id is
        ``"<parent id>/<call index>"`` unless given): ``handle.result()`` there waits for
        it durably, and cancelling the parent cancels it. In an async workflow, await
        :meth:`start_async`.

        ``debounce`` (seconds, with ``execution_id``): the execution runs that long after
        its start, and each start of the same id before it runs folds into it -- the last
        input wins and the wait starts again. Once it runs, a start of that id returns it
        as it is (name each burst, e.g. ``f"sync-{user}-{date}"``, to run again later).
        """
        definition = self.registry.workflow(workflow)
        payload = definition.encode_input(input)
        limit = self.registry.limit(definition, payload)
        if debounce is not None:
            debounce = _debounce(debounce, execution_id, limit)
        run = workflow_run("start", False)
        if run is not None:
            if debounce is not None:
                raise InvalidArgumentError("debounce is for starts outside a workflow")
            flow = primitives.start_child(run, definition, payload, execution_id, priority, limit)
            return WorkflowHandle(self, drive(run, flow))  # type: ignore[arg-type]
        execution_id = uuid.uuid4().hex if execution_id is None else execution_id
        check_execution_id(execution_id)
        check_priority(priority)
        # A worker of this process with a free slot (the fast path) -- not for an execution
        # that may have to wait: for a slot of its limit, or for its debounce.
        fast = limit is None and debounce is None
        lane = self.registry.lane(definition)
        local = self.local.reserve(priority, lane) if fast else None
        token = None if local is None else f"{local.worker_id}:{uuid.uuid4().hex}"
        store = self.store
        try:
            outcome = store.run(
                store.flows.start(
                    execution_id,
                    definition.name,
                    payload,
                    priority,
                    RUN,
                    timeout=definition.timeout,
                    lease_token=token,
                    visibility=local.visibility if local is not None else 30.0,
                    trace_context=HookChain(self.hooks).trace_context() if self.hooks else None,
                    limit=limit,
                    debounce=debounce,
                    lane=lane,
                )
            )
        except BaseException:
            if local is not None:
                local.unreserve()
            raise
        if local is not None:
            if outcome.created and outcome.lease_seq is not None and token is not None:
                lease = Lease(
                    seq=outcome.lease_seq,
                    group_id=execution_id,
                    event=RUN,
                    token=token,
                    expires_at=outcome.lease_expiry or 0.0,
                )
                local.adopt(Claimed(lease, outcome.record, []))
            else:
                local.unreserve()
        if not outcome.created and outcome.record.workflow != definition.name:
            raise ExecutionConflictError(
                f"execution {execution_id!r} exists and runs {outcome.record.workflow!r}, "
                f"not {definition.name!r}"
            )
        return WorkflowHandle(self, execution_id, created=outcome.created)  # type: ignore[arg-type]

    async def start_async(
        self,
        workflow: Any,
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
        debounce: float | None = None,
    ) -> WorkflowHandle[Any]:
        """:meth:`start` in an async workflow (a child) or async client code."""
        run = workflow_run("start", True)
        if run is None:
            start = functools.partial(
                self.start, workflow, input, execution_id=execution_id, priority=priority
            )
            return await asyncio.to_thread(start, debounce=debounce)
        if debounce is not None:
            raise InvalidArgumentError("debounce is for starts outside a workflow")
        definition = self.registry.workflow(workflow)
        payload = definition.encode_input(input)
        limit = self.registry.limit(definition, payload)
        flow = primitives.start_child(run, definition, payload, execution_id, priority, limit)
        return WorkflowHandle(self, await adrive(run, flow))  # type: ignore[arg-type]

    # -- follow ---------------------------------------------------------------------------

    def get(self, execution_id: str) -> WorkflowHandle[Any]:
        """The handle of an existing execution; :class:`ExecutionNotFoundError` otherwise."""
        if self.store.get(execution_id) is None:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        return WorkflowHandle(self, execution_id, created=False)  # type: ignore[arg-type]

    def list(
        self, status: Status | str | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return self.store.list(status=None if status is None else Status(status), limit=limit)

    def get_event(self, execution_id: str, key: str, timeout: float = 0.0) -> Any:
        """The latest value of an execution's event ``key``, waiting up to ``timeout``
        seconds for the first; :class:`ResultTimeoutError` if there is none by then.
        Not for workflow code (its result would not be recorded): use ``recv`` there."""
        if current_activation() is not None:
            raise NotInWorkflowError("get_event() is for client code; a workflow uses recv()")
        check_id(execution_id, what="execution_id")
        key = check_topic(key, what="event key")
        deadline = time.monotonic() + seconds_of(timeout, "timeout")
        delay = 0.01
        store = self.store
        while True:
            found, value = store.run(store.flows.get_event(execution_id, key))
            if found:
                return value
            if time.monotonic() >= deadline:
                raise ResultTimeoutError(f"execution {execution_id!r} has no event {key!r}")
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 1.5, 0.25)

    async def get_event_async(self, execution_id: str, key: str, timeout: float = 0.0) -> Any:
        """:meth:`get_event`, awaited."""
        return await asyncio.to_thread(self.get_event, execution_id, key, timeout)

    # -- steer ----------------------------------------------------------------------------

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
        run = workflow_run("send", False)
        if run is None:
            self.store.run(self.store.flows.send(execution_id, message, topic_, key))
            return
        drive(run, primitives.send(run, execution_id, message, topic_, key))

    async def send_async(
        self, execution_id: str, message: Any, topic: str | None = None, key: str | None = None
    ) -> None:
        """:meth:`send`, awaited (in an async workflow, or async client code)."""
        check_id(execution_id, what="execution_id")
        topic_ = check_topic(topic)
        to_json(message, what="message", limit=self.max_payload_bytes)
        run = workflow_run("send", True)
        if run is None:
            await asyncio.to_thread(self.send, execution_id, message, topic, key)
            return
        await adrive(run, primitives.send(run, execution_id, message, topic_, key))

    def cancel(self, execution_id: str) -> Status:
        """Cancel an execution: it stops at its next step boundary (a running step
        finishes and is recorded; no further step starts), its status becomes
        ``cancelled``, its children are cancelled with it. One that no worker has started
        (pending, its event not leased) is cancelled at once, its event removed. A
        finished execution is left as it is. Returns the status it had when the cancel
        was written."""
        check_id(execution_id, what="execution_id")
        return self.store.run(self.store.flows.cancel(execution_id))

    async def cancel_async(self, execution_id: str) -> Status:
        """:meth:`cancel`, awaited."""
        return await asyncio.to_thread(self.cancel, execution_id)

    def resume(self, execution_id: str, *, to_current_version: bool = False) -> bool:
        """Run a failed or cancelled execution again from its last recorded step, on the
        code deployed now (the step that failed it runs again, with a new round of its
        ``Retry`` and its failed attempts kept in its history; the steps before it are
        replayed from their records). False, and nothing changes, for any other status.

        It stays pinned to the version that started it (its workers run it), unless
        ``to_current_version``: then this engine's version runs it (replaying the history
        the older code recorded: check it with :meth:`replay` first)."""
        check_id(execution_id, what="execution_id")
        lane = self._current_lane(execution_id) if to_current_version else None
        return self.store.run(self.store.flows.resume(execution_id, RUN, lane))

    def fork(
        self,
        execution_id: str,
        from_step: int,
        *,
        new_execution_id: str | None = None,
        to_current_version: bool = False,
    ) -> WorkflowHandle[Any]:
        """Start a new execution of the same workflow and input that reuses the recorded
        results of ``execution_id``'s calls ``0 .. from_step - 1`` (their functions are not
        called) and runs from call ``from_step`` on the code deployed now: fix the bug,
        then run again from the step that failed. Idempotent by ``new_execution_id``.
        :class:`InvalidArgumentError` for a ``from_step`` past the calls ``execution_id``
        recorded (nothing is written). The new execution is pinned to the source's version,
        or with ``to_current_version`` to this engine's."""
        new_id = new_execution_id or uuid.uuid4().hex
        lane = self._current_lane(execution_id) if to_current_version else None
        self.store.run(self.store.flows.fork(execution_id, from_step, new_id, RUN, lane))
        return WorkflowHandle(self, new_id)  # type: ignore[arg-type]

    def _current_lane(self, execution_id: str) -> str:
        """The lane an execution's workflow has in this engine's version."""
        record = self.store.get(execution_id)
        if record is None:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        return self.registry.lane(self.registry.workflow(record.workflow))

    # -- check code against histories ----------------------------------------------------

    def replay(self, execution_id: str) -> ReplayReport:
        """Run the recorded history of ``execution_id`` through this engine's code, with
        no side effect: each recorded call's result is returned to the workflow, no step
        body runs, nothing is written (no lease, no commit). The report names the first
        call where the code no longer makes the recorded call, if any; an execution in
        flight is replayed up to where its history ends (a sleep, a wait, the next step).
        :class:`ExecutionNotFoundError` for an unknown id, :class:`UnknownWorkflowError`
        when its workflow is not registered here. ``raftflow replay`` is its command."""
        if current_activation() is not None:
            raise NotInWorkflowError("replay() is for client code, not for workflows")
        check_id(execution_id, what="execution_id")
        return replay(
            self.store,
            self.registry,
            execution_id,
            max_payload_bytes=self.max_payload_bytes,
            max_history=self.max_history,
        )

    async def replay_async(self, execution_id: str) -> ReplayReport:
        """:meth:`replay`, awaited."""
        return await asyncio.to_thread(self.replay, execution_id)

    # -- schedules ------------------------------------------------------------------------

    def list_schedules(self) -> builtins.list[ScheduleInfo]:
        """The schedules the database holds (of any app), with the time each waits for."""
        store = self.store
        return store.run(ScheduleFlows(store.clock).list())

    def remove_schedule(self, workflow: Any) -> bool:
        """Delete a workflow's schedule from the database (a workflow function or its
        name); False if it had none. Workers that still register it make it again within
        10 s: remove ``@engine.scheduled`` from the code first."""
        name = workflow if isinstance(workflow, str) else self.registry.workflow(workflow).name
        store = self.store
        return store.run(ScheduleFlows(store.clock).remove(name))


def _debounce(value: float, execution_id: str | None, limit: tuple[str, int] | None) -> float:
    seconds = check_seconds(value, what="debounce", allow_zero=False)
    if execution_id is None:
        raise InvalidArgumentError(
            "debounce needs an execution_id: the starts of one id fold into one execution"
        )
    if limit is not None:
        raise InvalidArgumentError(
            "debounce is not supported for a workflow with a concurrency limit"
        )
    return seconds
