"""Durable streams, the writing side: ``engine.write_stream`` and ``engine.close_stream``.

A write is a call of the workflow, recorded at its position (kind ``stream``, its key as
the name) like any other, and its value's row is a write of the very commit that records
the call (:func:`raftflow.stores.streams.write`): one transaction, so the value is
appended exactly when the call is recorded -- a replay finds the record and appends
nothing, a crash before the commit leaves neither. The commit is sent at once, so readers
see the value before the workflow goes on; it is the commit the call's record needs
anyway (a step's record is committed as the next call begins), so a write costs **one
Raft entry**, shared with other executions' commits (group commit), and no request of its
own. A write that the database refuses -- the stream closed, or full -- is recorded as a
failed call and raised in the workflow (:class:`~raftflow.errors.StreamClosedError`,
:class:`~raftflow.errors.StreamFullError`), on every replay alike.
"""

from __future__ import annotations

from typing import Any

from raftflow.engine.workflow.activation import Activation
from raftflow.engine.workflow.context import require_workflow
from raftflow.engine.workflow.drivers import adrive, drive
from raftflow.engine.workflow.steppath import (
    Io,
    Outcome,
    SendCommit,
    StepFlow,
    await_turn,
    call_begin,
)
from raftflow.stores import streams
from raftflow.stores.commit import CommitOutcome
from raftflow.stores.records import ErrorInfo
from raftflow.transports.payload import check_topic, to_json

from raftflow.errors import DatabaseError, StreamClosedError, StreamError, StreamFullError

_ERRORS: dict[str, type[StreamError]] = {
    cls.__name__: cls for cls in (StreamError, StreamClosedError, StreamFullError)
}


def write_stream(run: Activation, key: str, value: str | None) -> StepFlow[None]:
    """Append ``value`` (JSON text; None: close the stream) to this execution's stream
    ``key``, once: the call's record and the value commit together, now."""
    index, record = yield from call_begin(run, "stream", key)
    if record is None:
        write = streams.write(
            run.execution_id, key, value, run=run.record.run, call_idx=index, now=run.now()
        )
        run.stage(index, "stream", key, "succeeded", output="null", writes=(write,))
        outcome: CommitOutcome = yield SendCommit(run.take_staged())
        if outcome.failed is not None:
            failure = DatabaseError(outcome.failed)
            raise run.give_up("the database failed a stream's write", failure)
        if outcome.aborted is None:
            run.check_applied(outcome)
            if not run.held:
                yield from await_turn(run)
            return
        # Refused (nothing written, the lease as it was): record why, to raise it now and
        # on every replay; the record commits with the next call, as a step's does.
        found: Outcome = yield Io(streams.state(run.execution_id, key))
        if found.error is not None:
            raise run.give_up("a refused stream write's state could not be read", found.error)
        error = _refusal(run.execution_id, key, *found.value)
        info = ErrorInfo(type(error).__name__, str(error))
        record = run.stage(
            index, "stream", key, "failed", error=to_json(info.to_json(), what="stream error")
        )
    if record.error is not None:
        raise _ERRORS.get(record.error.type, StreamError)(record.error.message)


def _refusal(execution_id: str, key: str, closed: bool, length: int) -> StreamError:
    where = f"stream {key!r} of execution {execution_id!r}"
    if closed:
        return StreamClosedError(f"{where} is closed: it takes no more values")
    if length >= streams.MAX_STREAM_VALUES:
        return StreamFullError(f"{where} holds {length} values, its maximum")
    return StreamError(f"{where} refused the value")


class StreamWrites:
    """write_stream, close_stream and their async twins (module docstring)."""

    max_payload_bytes: int

    def write_stream(self, key: str, value: Any) -> None:
        """Append ``value`` (JSON) to this execution's stream ``key``, for any process's
        ``read_stream``: durable, in order, exactly once however often the workflow is
        replayed. :class:`~raftflow.errors.StreamClosedError` once the stream is closed,
        :class:`~raftflow.errors.StreamFullError` past ``MAX_STREAM_VALUES`` values."""
        key, text = self._stream_arguments(key, value)
        run = require_workflow("write_stream", False)
        drive(run, write_stream(run, key, text))

    async def write_stream_async(self, key: str, value: Any) -> None:
        """:meth:`write_stream` in an async workflow."""
        key, text = self._stream_arguments(key, value)
        run = require_workflow("write_stream", True)
        await adrive(run, write_stream(run, key, text))

    def close_stream(self, key: str) -> None:
        """Close this execution's stream ``key``: its readers stop after its last value,
        and a later ``write_stream`` to it raises. Closing a closed stream does nothing.
        (A stream that is never closed ends for its readers when the execution ends.)"""
        key = check_topic(key, what="stream key")
        run = require_workflow("close_stream", False)
        drive(run, write_stream(run, key, None))

    async def close_stream_async(self, key: str) -> None:
        """:meth:`close_stream` in an async workflow."""
        key = check_topic(key, what="stream key")
        run = require_workflow("close_stream", True)
        await adrive(run, write_stream(run, key, None))

    def _stream_arguments(self, key: str, value: Any) -> tuple[str, str]:
        key = check_topic(key, what="stream key")
        return key, to_json(value, what="stream value", limit=self.max_payload_bytes)
