"""The client face: what the :class:`~raftflow.Engine` and the :class:`~raftflow.Client`
share -- record a start, then follow and steer executions (get, list, events, send,
cancel, resume, fork) -- one implementation for both.

They differ in how a start finds its workflow: the engine by its registry (the code is
here: its input is validated, its lane is its own version's), the client by name
(engine/client/client.py: the lane of the version the live workers serve). Both apply the
workflow's start settings (engine/workflow/starts.py): the engine its own, the client
those the workers publish. Every call here goes to the store (one request each, unless it says
otherwise). Called from workflow code, ``send`` sends a recorded message: a durable call
of the workflow (:mod:`raftflow.engine.workflow.primitives`).
"""

from __future__ import annotations

import builtins
import time
import uuid
from typing import TYPE_CHECKING, Any, TypeVar, overload

from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.client.streams import StreamReads
from raftflow.engine.runtime.hooks import HookChain, Hooks
from raftflow.engine.runtime.local import LocalWorkers
from raftflow.engine.shards.partitions import key_route
from raftflow.engine.workflow import primitives
from raftflow.engine.workflow.context import current_activation, workflow_run
from raftflow.engine.workflow.drivers import drive
from raftflow.engine.workflow.durable import seconds_of
from raftflow.engine.workflow.events import RUN
from raftflow.engine.workflow.registry import Codec
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
    from raftflow.engine.shards.deployment import Shards
    from raftflow.stores.store import SqlStore

T = TypeVar("T")


class ClientFace(StreamReads):
    """get, list, get_event, send, cancel, resume, fork, read_stream; and the write of a
    start."""

    hooks: list[Hooks]
    #: The workers this engine runs in this process (the start fast path: runtime/local.py).
    local: LocalWorkers
    max_payload_bytes: int

    @property
    def shards(self) -> Shards:
        raise NotImplementedError  # the Engine's, the Client's

    def store_of(self, execution_id: str) -> SqlStore:
        """The store of the cluster that holds ``execution_id`` (the only one, unsharded)."""
        return self.shards.of(execution_id).store

    def _output(self, workflow: str, value: Any) -> Any:
        """A succeeded execution's stored output, as its caller gets it."""
        return value

    def _current_lane(self, execution_id: str) -> str:
        """The lane of ``execution_id``'s workflow at the version that runs it from now on
        (``to_current_version``)."""
        raise NotImplementedError

    # -- start ----------------------------------------------------------------------------

    def _record_start(
        self,
        workflow: str,
        payload: Any,
        execution_id: str,
        priority: int,
        *,
        lane: str,
        limit: tuple[str, int] | None = None,
        timeout: float | None = None,
        debounce: float | None = None,
        output: Codec | None = None,
        drawn: bool = False,
    ) -> WorkflowHandle[Any]:
        """Write the start of an execution of ``workflow`` (the JSON ``payload`` its input,
        ``execution_id`` and ``priority`` checked by :func:`start_arguments`) in ``lane``:
        the execution's record and its first event, atomically, in one request.
        ``drawn``: the id was drawn here, not given (sharded, a limited execution's is
        drawn again to live where its limit's slots are counted)."""
        # A worker of this process with a free slot (the fast path) -- not for an execution
        # that may have to wait: for a slot of its limit, or for its debounce.
        shards = self.shards
        shards.check_startable()
        if limit is not None and shards.sharded:
            execution_id = _placed_by_limit(shards, execution_id, limit[0], drawn)
        shard = shards.of(execution_id)
        fast = limit is None and debounce is None
        local = self.local.reserve(priority, lane, shard.name) if fast else None
        token = None if local is None else f"{local.worker_id}:{uuid.uuid4().hex}"
        store = shard.store
        try:
            outcome = store.run(
                store.flows.start(
                    execution_id,
                    workflow,
                    payload,
                    priority,
                    RUN,
                    timeout=timeout,
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
        if not outcome.created and outcome.record.workflow != workflow:
            raise ExecutionConflictError(
                f"execution {execution_id!r} exists and runs {outcome.record.workflow!r}, "
                f"not {workflow!r}"
            )
        return WorkflowHandle(self, execution_id, created=outcome.created, output=output)

    # -- follow ---------------------------------------------------------------------------

    @overload
    def get(self, execution_id: str, *, output_type: None = None) -> WorkflowHandle[Any]: ...

    @overload
    def get(self, execution_id: str, *, output_type: type[T]) -> WorkflowHandle[T]: ...

    def get(self, execution_id: str, *, output_type: Any = None) -> WorkflowHandle[Any]:
        """The handle of an existing execution; :class:`ExecutionNotFoundError` otherwise.
        ``output_type`` (a pydantic model, ``list[int]``...): what its output becomes."""
        if self.store_of(execution_id).get(execution_id) is None:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        output = None if output_type is None else Codec.of(output_type)
        return WorkflowHandle(self, execution_id, created=False, output=output)

    def list(
        self, status: Status | str | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status`` (of
        every cluster, sharded: the ``limit`` most recent of all)."""
        wanted = None if status is None else Status(status)
        found = [r for shard in self.shards for r in shard.store.list(status=wanted, limit=limit)]
        if len(self.shards) > 1:
            found.sort(key=lambda record: (record.created_at, record.id), reverse=True)
        return found[:limit]

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
        store = self.store_of(execution_id)
        while True:
            found, value = store.run(store.flows.get_event(execution_id, key))
            if found:
                return value
            if time.monotonic() >= deadline:
                raise ResultTimeoutError(f"execution {execution_id!r} has no event {key!r}")
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 1.5, 0.25)

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
            store = self.store_of(execution_id)
            store.run(store.flows.send(execution_id, message, topic_, key))
            return
        drive(run, primitives.send(run, execution_id, message, topic_, key))

    def cancel(self, execution_id: str) -> Status:
        """Cancel an execution: it stops at its next step boundary (a running step
        finishes and is recorded; no further step starts), its status becomes
        ``cancelled``, its children are cancelled with it. One that no worker has started
        (pending, its event not leased) is cancelled at once, its event removed. A
        finished execution is left as it is. Returns the status it had when the cancel
        was written."""
        check_id(execution_id, what="execution_id")
        store = self.store_of(execution_id)
        return store.run(store.flows.cancel(execution_id))

    def resume(self, execution_id: str, *, to_current_version: bool = False) -> bool:
        """Run a failed or cancelled execution again from its last recorded step, on the
        code deployed now (the step that failed it runs again, with a new round of its
        ``Retry`` and its failed attempts kept in its history; the steps before it are
        replayed from their records). False, and nothing changes, for any other status.

        It stays pinned to the version that started it (its workers run it), unless
        ``to_current_version``: then the current version runs it -- an engine's own, a
        client's the one the live workers serve -- replaying the history the older code
        recorded (check it with ``engine.replay`` first)."""
        check_id(execution_id, what="execution_id")
        lane = self._current_lane(execution_id) if to_current_version else None
        store = self.store_of(execution_id)
        return store.run(store.flows.resume(execution_id, RUN, lane))

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
        or with ``to_current_version`` to the current one (as :meth:`resume`)."""
        shard = self.shards.of(execution_id)
        new_id = new_execution_id or _id_on(self.shards, shard.name)
        if self.shards.of(new_id) is not shard:
            raise InvalidArgumentError(
                f"new_execution_id {new_id!r} routes to another cluster than "
                f"{execution_id!r}: a fork is made on its source's cluster -- give an id "
                f"that begins like the source's ({execution_id.split('/')[0]!r}/...)"
            )
        lane = self._current_lane(execution_id) if to_current_version else None
        shard.store.run(shard.store.flows.fork(execution_id, from_step, new_id, RUN, lane))
        return WorkflowHandle(self, new_id)


def _placed_by_limit(shards: Shards, execution_id: str, key: str, drawn: bool) -> str:
    """A limited execution's id, on the cluster that counts its limit's slots (sharded:
    one cluster admits every execution of the limit, so the limit holds across them)."""
    home = shards.of(key_route(key))
    if shards.of(execution_id) is home:
        return execution_id
    if drawn:
        return _id_on(shards, home.name)
    raise InvalidArgumentError(
        f"execution {execution_id!r} is limited by {key!r}, whose executions live on cluster "
        f"{home.name!r} (one cluster admits them all, so the limit holds across the "
        f"deployment): give an id that begins with {key_route(key) + '/'!r}, or none"
    )


def _id_on(shards: Shards, name: str) -> str:
    """A new random id that routes to the cluster ``name`` (the first of a few draws that
    does: about one in as many as the clusters)."""
    while True:
        candidate = uuid.uuid4().hex
        if shards.of(candidate).name == name:
            return candidate


def start_arguments(execution_id: str | None, priority: int) -> str:
    """The id of a start (a new one if None), after checking it and ``priority``."""
    execution_id = uuid.uuid4().hex if execution_id is None else execution_id
    check_execution_id(execution_id)
    check_priority(priority)
    return execution_id


def check_debounce(value: float, execution_id: str | None, limit: tuple[str, int] | None) -> float:
    """A start's ``debounce`` (seconds), refused where it cannot apply."""
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
