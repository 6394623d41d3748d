"""The durable primitives as step-path flows: sleep, recv, send, child workflows, events.

Each is a call of the workflow, recorded at its position like a step (``kind`` says which),
so a replay meets the same calls in the same order -- or fails with
:class:`~raftflow.errors.NonDeterminismError` naming both -- and gets the same
answers. Each waits the one way the step path waits (:func:`~raftflow.engine.workflow.steppath.
wait_until`): a parked event that nothing but its deadline, or what it waits for, wakes.

==========  ==============================================================================
call        recorded as (kind, name)         its Raft entries
==========  ==============================================================================
sleep       sleep, "sleep": its wake time    the commit that parks (shared with the step
                                             before it) + the claim that wakes it
recv        recv, topic: the message taken   as sleep, while none is there; none at all
                                             when one is (the commit marks it read)
send        send, target id                  one request (the signal, idempotent by key)
child       child, workflow: the child's id  one request (its start, idempotent by id);
                                             two for one on another cluster (sharded:
                                             noted here, started there)
wait        wait, child id: its outcome      as recv
event       event, key                       one request (the value)
stream      stream, key                      none: the value goes in the record's commit,
                                             sent at once (:mod:`.streams`)
==========  ==============================================================================
"""

from __future__ import annotations

import math
from typing import Any

from raftflow.engine.shards.partitions import key_route
from raftflow.engine.workflow.activation import Activation, Unwind
from raftflow.engine.workflow.events import RUN
from raftflow.engine.workflow.outcomes import message_of
from raftflow.engine.workflow.registry import Registry, WorkflowDef
from raftflow.engine.workflow.steppath import Io, Outcome, StepFlow, call_begin, suspend, wait_until
from raftflow.stores import outbox
from raftflow.stores.records import ErrorInfo, StartOutcome, Status, StepRecord
from raftflow.transports.payload import to_json

from raftflow.errors import (
    ExecutionConflictError,
    ExecutionFinishedError,
    ExecutionNotFoundError,
    InvalidArgumentError,
    ResultTimeoutError,
    StoreError,
    WorkflowCancelledError,
    WorkflowFailedError,
)

#: A wait without a timeout parks for this long (its wake-up comes first).
FOREVER = 10 * 365 * 86400.0


def sleep(run: Activation, seconds: float) -> StepFlow[None]:
    """Sleep until a wake time recorded the first time: a replay waits only what remains."""
    index, record = yield from call_begin(run, "sleep", "sleep")
    if record is None:
        record = run.stage(index, "sleep", "sleep", "succeeded", wake_at=run.after(seconds))
    yield from wait_until(run, record.wake_at or 0.0)


def recv(run: Activation, topic: str, timeout: float | None) -> StepFlow[Any]:
    """The oldest unread message of ``topic``, or None once ``timeout`` has passed."""
    index, record = yield from call_begin(run, "recv", topic)
    if record is not None and record.done:
        return record.output
    deadline = record.wake_at if record is not None and record.wake_at else _deadline(run, timeout)
    started = None if record is None else record.started_at
    while True:
        signal = run.take_signal(topic)
        if signal is not None:
            output = to_json(signal.payload, what="message")
            run.stage(index, "recv", topic, "succeeded", output=output, started=started,
                      consume_signal=signal.seq)  # fmt: skip
            return signal.payload
        if run.passed(deadline):
            run.stage(index, "recv", topic, "succeeded", output="null", started=started)
            return None
        if record is None:
            record = run.stage(index, "recv", topic, "waiting", wake_at=deadline)
            started = record.started_at
        yield from suspend(run, deadline, wake_topic=topic)


def send(
    run: Activation, execution_id: str, message: Any, topic: str, key: str | None
) -> StepFlow[None]:
    """Send from a workflow: recorded, and idempotent by a key derived from this call, so
    a replay never sends twice."""
    index, record = yield from call_begin(run, "send", execution_id)
    if record is None:
        key = key or f"{run.execution_id}/{index}"
        # Sharded, a send to an execution on another cluster goes there directly (then is
        # recorded here): a crash between the two sends it again, and its key dedups it.
        flow = run.host.flows.send(execution_id, message, topic, key)
        outcome: Outcome = yield Io(flow, route=execution_id)
        record = _stage_outcome(run, index, "send", execution_id, outcome, None)
    _raise_refusal(record.error)


def start_child(
    run: Activation,
    definition: WorkflowDef,
    payload: Any,
    execution_id: str | None,
    priority: int,
    limit: tuple[str, int] | None = None,
) -> StepFlow[str]:
    """Start a child execution once (its id is :func:`default_child_id` unless given). An
    execution that has the id and is not this one's child is refused, not adopted: the
    parent would wait for ever for it (only its own children wake it)."""
    index, record = yield from call_begin(run, "child", definition.name)
    if record is None:
        child_id = execution_id or default_child_id(run, index)
        if limit is not None and not run.host.holds_here(key_route(limit[0])):
            # Sharded: a limited child lives where its limit's slots are counted.
            child_id = execution_id or f"{key_route(limit[0])}/{child_id}"
        flow = run.host.flows.start(
            child_id,
            definition.name,
            payload,
            priority,
            RUN,
            parent_id=run.execution_id,
            timeout=definition.timeout,
            limit=limit,
            lane=run.host.registry.lane(definition),
        )
        outcome: Outcome
        if limit is not None and not run.host.same_cluster(child_id, key_route(limit[0])):
            outcome = Outcome(error=_misplaced(child_id, limit[0]))
        elif run.host.holds_here(child_id):
            outcome = yield Io(flow)
        else:  # sharded, on another cluster: noted here first, so its news finds the parent
            note = outbox.note_child(
                run.host.flows.clock, run.execution_id, child_id, definition.name, run.lease
            )
            outcome = yield Io(note)
            if outcome.error is None and not outcome.value:  # another worker holds it now
                run.held = False
                raise Unwind()
            if outcome.error is None:
                outcome = yield Io(flow, route=child_id)
        if isinstance(outcome.value, StartOutcome):
            refusal = _not_a_child(run, child_id, definition, outcome.value)
            outcome = outcome if refusal is None else Outcome(error=refusal)
        record = _stage_outcome(run, index, "child", definition.name, outcome, child_id)
    _raise_refusal(record.error)
    return str(record.output)


def _misplaced(child_id: str, key: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"child id {child_id!r} routes to another cluster than its limit {key!r}, whose "
        f"executions live on one cluster (so the limit holds across the deployment): give "
        f"an id that begins with {key_route(key) + '/'!r}, or the default"
    )


def default_child_id(run: Activation, index: int) -> str:
    """``<parent id>/<call index>``; from the second run on (``continue_as_new``), with
    the run's number (``<parent id>/run2/<call index>``): a run's children are its own."""
    number = run.record.run
    return (
        f"{run.execution_id}/{index}" if number == 1 else f"{run.execution_id}/run{number}/{index}"
    )


def _not_a_child(
    run: Activation, child_id: str, definition: WorkflowDef, started: StartOutcome
) -> ExecutionConflictError | None:
    """Why the execution found at ``child_id`` cannot be this call's child, if it cannot."""
    found = started.record
    if found.workflow != definition.name:
        return ExecutionConflictError(
            f"execution {child_id!r} exists and runs {found.workflow!r}, not {definition.name!r}"
        )
    if not started.created and found.parent_id != run.execution_id:
        how = "independently" if found.parent_id is None else f"by {found.parent_id!r}"
        return ExecutionConflictError(
            f"execution {child_id!r} exists, started {how}: it is not a child of "
            f"{run.execution_id!r}, which would wait for it for ever; give the child "
            "an execution_id of its own"
        )
    return None


def wait_child(run: Activation, child_id: str, timeout: float | None) -> StepFlow[Any]:
    """Wait for a child's outcome: its output, or its failure or cancel raised here."""
    index, record = yield from call_begin(run, "wait", child_id)
    if record is not None and not record.done:
        started: float | None = record.started_at
        deadline = record.wake_at or _deadline(run, timeout)
    else:
        started, deadline = None, _deadline(run, timeout)
    while record is None or not record.done:
        child = run.children.get(child_id)
        if child is not None and child.status.is_final:
            result = {
                "workflow": child.workflow,
                "status": child.status.value,
                "output": child.output,
                "error": None if child.error is None else child.error.to_json(),
            }
            output = to_json(result, what="child outcome")
            record = run.stage(index, "wait", child_id, "succeeded", output=output, started=started)
        elif run.passed(deadline):
            error = ErrorInfo("ResultTimeoutError", f"child {child_id!r} did not finish in time")
            record = run.stage(index, "wait", child_id, "failed", started=started,
                               error=to_json(error.to_json(), what="timeout"))  # fmt: skip
        else:
            if record is None:
                record = run.stage(index, "wait", child_id, "waiting", wake_at=deadline)
                started = record.started_at
            yield from suspend(run, deadline, wake_child=child_id)
    if not record.succeeded:
        raise ResultTimeoutError((record.error or ErrorInfo("Error", "")).message)
    return child_outcome(child_id, record.output, run.host.registry)


def set_event(run: Activation, key: str, value: Any) -> StepFlow[None]:
    """Publish the latest value of ``key`` for anyone polling ``get_event``."""
    index, record = yield from call_begin(run, "event", key)
    if record is None:
        outcome: Outcome = yield Io(run.host.flows.set_event(run.execution_id, key, value))
        record = _stage_outcome(run, index, "event", key, outcome, None)
    _raise_refusal(record.error)


def patched(run: Activation, patch: str) -> StepFlow[bool]:
    """True on code paths a patch introduced: for a run that reaches this point on code
    with the patch (a marker is recorded, so its replays answer the same), False for a
    run that passed this point on older code (its history has another call here)."""
    record = run.peek()
    if record is not None and (record.kind, record.name) != ("patch", patch):
        return False  # recorded by code without the patch: take the old path, no position
    index, record = yield from call_begin(run, "patch", patch)
    if record is None:
        run.stage(index, "patch", patch, "succeeded", output="true")
    return True


def deprecate_patch(run: Activation, patch: str) -> StepFlow[None]:
    """Once no run older than a patch is left: the old path's code is gone, and a marker
    recorded by ``patched`` is stepped over (new runs record nothing)."""
    record = run.peek()
    if record is not None and (record.kind, record.name) == ("patch", patch):
        yield from call_begin(run, "patch", patch)


def child_outcome(child_id: str, stored: Any, registry: Registry) -> Any:
    """A child's recorded outcome as its result: the output (typed by its workflow's
    return annotation, when registered here), or the error raised."""
    status = Status(stored["status"])
    if status is Status.SUCCEEDED:
        definition = registry.workflows.get(stored.get("workflow", ""))
        output = stored["output"]
        return output if definition is None else definition.output.from_json_value(output)
    error = ErrorInfo.from_json(stored.get("error") or {"type": "Error", "message": ""})
    if status is Status.CANCELLED:
        raise WorkflowCancelledError(f"child {child_id!r} was cancelled: {error.message}")
    raise WorkflowFailedError(child_id, error)


def _deadline(run: Activation, timeout: float | None) -> float:
    return run.after(FOREVER if timeout is None or math.isinf(timeout) else timeout)


def _stage_outcome(
    run: Activation, index: int, kind: str, name: str, outcome: Outcome, value: Any
) -> StepRecord:
    if outcome.error is None:
        return run.stage(index, kind, name, "succeeded", output=to_json(value, what=kind))
    info = ErrorInfo(type(outcome.error).__name__, message_of(outcome.error))
    return run.stage(index, kind, name, "failed", error=to_json(info.to_json(), what=kind))


_REFUSALS: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in (ExecutionNotFoundError, ExecutionFinishedError, ExecutionConflictError)
}


def _raise_refusal(error: ErrorInfo | None) -> None:
    """A refused send or start raises in the workflow as the error it was, every replay."""
    if error is not None:
        raise _REFUSALS.get(error.type, StoreError)(error.message)
