"""WorkflowHandle: one execution seen from the outside (status, result, steps)."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from raftflow.engine.workflow import primitives
from raftflow.engine.workflow.context import workflow_run
from raftflow.engine.workflow.drivers import adrive, drive
from raftflow.stores.records import ErrorInfo, ExecutionRecord, Status, StepRecord
from raftflow.transports.payload import check_seconds

from raftflow.errors import (
    ExecutionNotFoundError,
    ResultTimeoutError,
    WorkflowCancelledError,
    WorkflowFailedError,
)

if TYPE_CHECKING:
    from raftflow.engine.client.face import ClientFace
    from raftflow.engine.runtime.local import LocalWorkers
    from raftflow.engine.workflow.registry import Codec

T = TypeVar("T")

#: While a worker of this process runs the execution, result() reads it this often.
HELD_READ = 1.0
#: result()'s first reads of an execution run elsewhere come 10 ms apart (a short
#: workflow is picked up, run and committed in that time), then the interval grows by
#: half up to ``poll_interval``: a short workflow's result is seen soon after its commit,
#: for a few more weak reads (no Raft entry) over a long wait.
DENSE_READS = 10


class WorkflowHandle(Generic[T]):
    """An execution by id; ``id`` is also its queue group. ``client``: the
    :class:`~raftflow.Engine` or :class:`~raftflow.Client` that made it."""

    def __init__(
        self,
        client: ClientFace,
        execution_id: str,
        *,
        created: bool = True,
        output: Codec | None = None,
    ) -> None:
        self.client = client
        self.id = execution_id
        #: False when ``start(..., execution_id=...)`` found the execution already there.
        self.created = created
        #: What the output becomes (``output_type=``); None: the engine's registry says, or
        #: plain JSON.
        self.output = output

    def info(self) -> ExecutionRecord:
        """The execution as stored now."""
        record = self.client.store_of(self.id).get(self.id)
        if record is None:
            raise ExecutionNotFoundError(f"no execution has id {self.id!r}")
        return record

    def status(self) -> Status:
        """pending, running, succeeded, failed or cancelled."""
        return self.info().status

    def steps(self) -> list[StepRecord]:
        """The recorded steps, in call order."""
        return list(self.client.store_of(self.id).steps(self.id))

    def children(self) -> list[ExecutionRecord]:
        """The executions this one started (``engine.start`` in its workflow code)."""
        return list(self.client.store_of(self.id).children(self.id))

    def runs(self) -> list[ExecutionRecord]:
        """The runs this execution ended with ``engine.continue_as_new``, oldest first
        (ids ``"<id>#1"``, ``"<id>#2"``...; their steps are under those ids)."""
        return list(self.client.store_of(self.id).runs(self.id))

    def cancel(self) -> Status:
        """Cancel the execution (see :meth:`Engine.cancel`); its status when asked."""
        return self.client.cancel(self.id)

    def result(self, timeout: float | None = None, *, poll_interval: float = 0.05) -> T:
        """Wait for the execution to finish and return its output, typed by the
        workflow's return annotation. Raises :class:`WorkflowFailedError` (with the stored
        error) if it failed, :class:`WorkflowCancelledError` if it was cancelled and
        :class:`ResultTimeoutError` after ``timeout`` seconds.

        In workflow code (a child's handle) the wait is durable: recorded, and parked
        without a worker until the child finishes. In an async workflow, await
        :meth:`result_async`.
        """
        run = workflow_run("result", False)
        if run is not None:
            timeout = (
                None if timeout is None else check_seconds(timeout, what="timeout", allow_zero=True)
            )
            return drive(run, primitives.wait_child(run, self.id, timeout))  # type: ignore[no-any-return]
        deadline = None if timeout is None else time.monotonic() + timeout
        local = self.client.local
        ticket = local.ticket()  # an outcome whose commit was sent later is handed over
        local.watch(self.id)
        try:
            return self._wait(local, ticket, deadline, timeout, poll_interval)  # type: ignore[no-any-return]
        finally:
            local.unwatch(self.id)

    def _wait(
        self,
        local: LocalWorkers,
        ticket: int,
        deadline: float | None,
        timeout: float | None,
        poll_interval: float,
    ) -> Any:
        delay = min(poll_interval, 0.01)
        status = Status.RUNNING
        read_at = time.monotonic()
        reads = 0
        while True:
            since = local.news(self.id)
            holding = local.holds(self.id)
            # Once the worker's turn is over (its slot free again for this client's next
            # start), the outcome it committed since this call began needs no read.
            kept = None if holding else local.outcome(self.id, ticket)
            if kept is not None:
                return self._outcome(kept.workflow, kept.status, kept.output, kept.error)
            # Run here since its start: not read while the worker that runs it is at it (it
            # tells when its turn is over); read at least every HELD_READ seconds anyway.
            now = time.monotonic()
            held = (
                holding
                and now - read_at < HELD_READ
                and (deadline is None or now < deadline)  # a timeout reads before it raises
            )
            if not held:
                record = self.info()
                read_at, status = time.monotonic(), record.status
                reads += 1
                if record.status.is_final:
                    return self._outcome(
                        record.workflow, record.status, record.output, record.error
                    )
            if deadline is not None and time.monotonic() >= deadline:
                raise ResultTimeoutError(
                    f"execution {self.id!r} is still {status.value} after {timeout}s"
                )
            pause = HELD_READ if held else delay
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            # Between polls, wake at once at news of it from a worker of this process (also
            # news during the read above: the count was taken before it).
            local.wait(self.id, since, pause)
            if not held and reads >= DENSE_READS:
                delay = min(delay * 1.5, poll_interval)

    async def result_async(self, timeout: float | None = None, *, poll_interval: float = 0.05) -> T:
        """:meth:`result` in an async workflow (durable) or async client code (polling)."""
        run = workflow_run("result", True)
        if run is None:
            return await asyncio.to_thread(self.result, timeout, poll_interval=poll_interval)
        timeout = (
            None if timeout is None else check_seconds(timeout, what="timeout", allow_zero=True)
        )
        return await adrive(run, primitives.wait_child(run, self.id, timeout))

    def _outcome(self, workflow: str, status: Status, output: Any, error: ErrorInfo | None) -> Any:
        if status is Status.SUCCEEDED:
            if self.output is not None:
                return self.output.from_json_value(output)
            return self.client._output(workflow, output)
        if status is Status.CANCELLED:
            reason = error.message if error else "cancelled"
            raise WorkflowCancelledError(f"execution {self.id!r} was cancelled: {reason}")
        raise WorkflowFailedError(self.id, error or ErrorInfo("Error", "failed"))

    def __repr__(self) -> str:
        return f"<WorkflowHandle {self.id}>"
