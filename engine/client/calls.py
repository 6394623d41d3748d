"""The engine's client calls: start a registered workflow, replay a history, schedules;
the rest of the client face (get, list, send, cancel, resume, fork, events) is shared with
:class:`~raftflow.Client` (engine/client/face.py).

Called from workflow code, ``start`` starts a child: a durable call of the workflow
(:mod:`raftflow.engine.workflow.primitives`).
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, TypeVar, overload

from raftflow.engine.client.face import ClientFace, check_debounce, start_arguments
from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.client.replay import ReplayReport, replay
from raftflow.engine.runtime.schedules import ScheduleFlows, ScheduleInfo
from raftflow.engine.workflow import primitives
from raftflow.engine.workflow.context import current_activation, workflow_run
from raftflow.engine.workflow.drivers import adrive, drive
from raftflow.engine.workflow.registry import Registry
from raftflow.engine.workflow.schedule import SCHEDULE_PREFIX
from raftflow.stores.records import Status
from raftflow.transports.payload import check_id, check_topic, to_json

from raftflow.errors import ExecutionNotFoundError, InvalidArgumentError, NotInWorkflowError

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

T = TypeVar("T")


class ClientCalls(ClientFace):
    """start (by function or name), replay, schedules; and the shared client face."""

    registry: Registry
    max_history: int

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
        settings = self.registry.start_settings(definition)
        key = definition.concurrency_key_of(payload)
        limit = settings.limit(definition.name, definition.queue, key)
        if debounce is not None:
            debounce = check_debounce(debounce, execution_id, limit)
        run = workflow_run("start", False)
        if run is not None:
            if debounce is not None:
                raise InvalidArgumentError("debounce is for starts outside a workflow")
            flow = primitives.start_child(run, definition, payload, execution_id, priority, limit)
            return WorkflowHandle(self, drive(run, flow))
        return self._record_start(
            definition.name,
            payload,
            start_arguments(execution_id, priority),
            priority,
            drawn=execution_id is None,
            lane=self.registry.lane(definition),
            limit=limit,
            timeout=settings.timeout,
            debounce=debounce,
        )

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
        return WorkflowHandle(self, await adrive(run, flow))

    # -- the face's calls, awaited (in an async workflow or async client code) -----------

    async def get_event_async(self, execution_id: str, key: str, timeout: float = 0.0) -> Any:
        """:meth:`get_event`, awaited."""
        return await asyncio.to_thread(self.get_event, execution_id, key, timeout)

    def read_stream_async(
        self, execution_id: str, key: str, offset: int = 0, follow: bool = True
    ) -> AsyncIterator[Any]:
        """:meth:`read_stream` as an async iterator (``async for``)."""
        return self._read_stream_async(execution_id, key, offset, follow)

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

    async def cancel_async(self, execution_id: str) -> Status:
        """:meth:`cancel`, awaited."""
        return await asyncio.to_thread(self.cancel, execution_id)

    def _output(self, workflow: str, value: Any) -> Any:
        definition = self.registry.workflows.get(workflow)
        if definition is None:
            return value  # not registered here: plain JSON
        return definition.output.from_json_value(value)

    def _current_lane(self, execution_id: str) -> str:
        """The lane an execution's workflow has in this engine's version."""
        record = self.store_of(execution_id).get(execution_id)
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
            self.store_of(execution_id),
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
        """The schedules the database holds (of any app), with the time each waits for
        (sharded: each cluster's, a schedule on the cluster of its workflow's name)."""
        found = [
            info
            for shard in self.shards
            for info in shard.store.run(ScheduleFlows(shard.store.clock).list())
        ]
        return sorted(found, key=lambda info: info.workflow) if len(self.shards) > 1 else found

    def remove_schedule(self, workflow: Any) -> bool:
        """Delete a workflow's schedule from the database (a workflow function or its
        name); False if it had none. Workers that still register it make it again within
        10 s: remove ``@engine.scheduled`` from the code first."""
        name = workflow if isinstance(workflow, str) else self.registry.workflow(workflow).name
        store = self.store_of(SCHEDULE_PREFIX + name)
        return store.run(ScheduleFlows(store.clock).remove(name))
