"""Staging: a call's record kept until it is committed, and the commit it becomes.

A run stages the outcome of each call (a step's result or error, a failed attempt, a wait)
and commits it with the workflow's next call, or with the workflow's outcome if it returns
first; :meth:`Staging.take_staged` turns what is staged, with where the next event goes,
into one :class:`~raftflow.stores.commit.Commit`. Part of
:class:`~raftflow.engine.workflow.activation.Activation`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from raftflow.engine.workflow.events import RUN_TEXT
from raftflow.engine.workflow.outcomes import encode_result, error_info, error_json
from raftflow.engine.workflow.registry import Codec, StepDef, WorkflowDef
from raftflow.stores.commit import Commit, Write
from raftflow.stores.records import AttemptRecord, ErrorInfo, ExecutionRecord, Status, StepRecord
from raftflow.stores.rows import cancelled_error
from raftflow.transports.contract import Lease
from raftflow.transports.payload import from_json, to_json

from raftflow.errors import StepError, WorkflowError

if TYPE_CHECKING:
    from raftflow.engine.workflow.host import Host


@dataclass(frozen=True, slots=True)
class Staged:
    """A call's record that is not committed yet, as the commit will write it."""

    record: StepRecord
    output: str | None
    error: str | None
    attempt: str | None = None  # a failed attempt to append to the step's history
    consume_signal: int | None = None
    # A transaction step's attempt: its writes (committed with this record or not at all),
    # and what :func:`~raftflow.engine.workflow.steppath.rewind` needs if they are refused.
    writes: tuple[Write, ...] = ()
    previous: StepRecord | None = None
    attempt_started: float = 0.0


class Staging:
    """The staging half of a run (its fields are the activation's)."""

    host: Host
    workflow: WorkflowDef
    record: ExecutionRecord
    lease: Lease
    held: bool
    turn_steps: int
    recorded: dict[int, StepRecord]
    last_index: int
    staged: Staged | None
    sent: Staged | None
    fatal: WorkflowError | None

    @property
    def execution_id(self) -> str:
        return self.record.id

    def now(self) -> float:
        raise NotImplementedError  # the activation's

    def after(self, seconds: float, *, now: float | None = None) -> float:
        raise NotImplementedError  # the activation's

    def stage_step(
        self,
        step: StepDef,
        index: int,
        started: float,
        value: Any,
        exc: Exception | None,
        *,
        attempts: int = 1,
        previous: StepRecord | None = None,
        writes: tuple[Write, ...] = (),
    ) -> StepRecord:
        """Keep a step's final outcome until its commit (with the next call, or the
        outcome): this code is then replayed, so only a crash in between re-runs it.
        ``writes``: a transaction step's, committed with the record (dropped when the
        step failed)."""
        output, exc = self._encode(step.output, value, exc, f"step {step.name!r}")
        error = None if exc is None else error_json(exc, what="step error")
        return self.stage(
            index,
            "step",
            step.name,
            "succeeded" if exc is None else "failed",
            output=output,
            error=error,
            started=started if previous is None else previous.started_at,
            attempts=attempts,
            history=() if previous is None else previous.history,
            writes=writes if exc is None else (),
            previous=previous,
            attempt_started=started,
        )

    def stage_retry(
        self,
        step: StepDef,
        index: int,
        attempt: int,
        started: float,
        exc: Exception,
        delay: float,
        previous: StepRecord | None,
    ) -> StepRecord:
        """A failed attempt with another one due ``delay`` seconds after its end (surely,
        on the cluster's clock: :meth:`after`): recorded as ``retrying``. The end and the
        wake time are one reading of the clock, so a thread stalled between two readings
        cannot bring the next attempt closer than ``delay`` to this one's recorded end."""
        info = error_info(exc)
        ended = self.now()
        wake_at = self.after(delay, now=ended)
        entry = AttemptRecord(attempt, info.type, info.message, started, ended)
        history = (*(() if previous is None else previous.history), entry)
        return self.stage(
            index,
            "step",
            step.name,
            "retrying",
            error=to_json(info.to_json(), what="step error"),
            started=started if previous is None else previous.started_at,
            attempts=attempt,
            wake_at=wake_at,
            history=history,
            attempt=to_json(
                {
                    "attempt": attempt,
                    "type": info.type,
                    "message": info.message,
                    "started_at": started,
                    "ended_at": entry.ended_at,
                },
                what="attempt",
            ),
        )

    def stage(
        self,
        index: int,
        kind: str,
        name: str,
        status: str,
        *,
        output: str | None = None,
        error: str | None = None,
        started: float | None = None,
        attempts: int = 1,
        wake_at: float | None = None,
        history: tuple[AttemptRecord, ...] = (),
        attempt: str | None = None,
        consume_signal: int | None = None,
        writes: tuple[Write, ...] = (),
        previous: StepRecord | None = None,
        attempt_started: float = 0.0,
    ) -> StepRecord:
        """Keep the record of a call (JSON already encoded) until the next commit."""
        now = self.now()
        record = StepRecord(
            execution_id=self.execution_id,
            idx=index,
            name=name,
            succeeded=status == "succeeded",
            output=None if output is None else from_json(output),
            error=None if error is None else ErrorInfo.from_json(from_json(error)),
            started_at=now if started is None else started,
            ended_at=now,
            worker_id=self.host.worker_id,
            kind=kind,
            status=status,
            attempts=attempts,
            wake_at=wake_at,
            history=history,
        )
        self.staged = Staged(
            record, output, error, attempt, consume_signal, writes, previous, attempt_started
        )
        self.recorded[index] = record
        self.last_index = max(self.last_index, index)
        return record

    def take_staged(self, **outcome: Any) -> Commit:
        """The commit of the staged call and of ``outcome``: a final status, or where the
        next event goes (kept by the turn, or parked: ``park_until``, ``wake_*``)."""
        staged, self.staged = self.staged, None
        self.sent = staged
        # One Commit built from one dict: a replace() per part re-ran its 30-field __init__
        # three or four times per step.
        fields: dict[str, Any] = {
            "execution_id": self.execution_id,
            "lease_seq": self.lease.seq,
            "lease_token": self.lease.token,
            "worker_id": self.host.worker_id,
            **outcome,
        }
        if staged is not None:
            record = staged.record
            fields.update(
                step_idx=record.idx,
                step_name=record.name,
                step_kind=record.kind,
                step_status=record.status,
                step_output=staged.output,
                step_error=staged.error,
                step_started_at=record.started_at,
                step_attempts=record.attempts,
                step_wake_at=record.wake_at,
                step_attempt=staged.attempt,
                consume_signal=staged.consume_signal,
                writes=staged.writes,
            )
        status = fields.get("status")
        if status is None or not status.is_final:  # the run goes on
            fields.update(
                status=Status.RUNNING, next_event=RUN_TEXT, next_priority=self.record.priority
            )
            if fields.get("park_until") is None and self.host.keep_turn(self.turn_steps):
                fields["next_token"] = self.lease.token
        return Commit(**fields)

    def final_commit(self, value: Any, exc: Exception | None) -> Commit | None:
        """The commit of the workflow's outcome (with the staged step), or None when this
        worker no longer holds the execution: the next claimer replays to here."""
        if not self.held:
            return None
        if self.fatal is not None:
            exc = self.fatal
        what = f"workflow {self.workflow.name!r}"
        output, exc = self._encode(self.workflow.output, value, exc, what)
        error = None
        if exc is not None:
            info = error_info(exc)
            if isinstance(exc, StepError):  # report the step's own exception
                info = replace(exc.error, message=f"in step {exc.step!r}: {exc.error.message}")
            error = to_json(info.to_json(), what="workflow error")
        status = Status.SUCCEEDED if exc is None else Status.FAILED
        unlinked = self.record.parent_id is None and self.workflow.concurrency is None
        return self.take_staged(status=status, output=output, error=error, unlinked=unlinked)

    def continue_commit(self, input_json: str) -> Commit:
        """The commit that ends this run and starts the next with ``input_json``."""
        return self.take_staged(continue_input=input_json)

    def cancel_commit(self, reason: str) -> Commit:
        """The commit that ends the run as cancelled (the staged call goes with it)."""
        return self.take_staged(status=Status.CANCELLED, error=cancelled_error(reason))

    def _encode(
        self, codec: Codec, value: Any, exc: Exception | None, what: str
    ) -> tuple[str | None, Exception | None]:
        """A result as JSON text, or the error that makes it the outcome (see
        :func:`~raftflow.engine.outcomes.encode_result`)."""
        if exc is not None:
            return None, exc
        return encode_result(codec, value, what=what, limit=self.host.max_payload_bytes)
