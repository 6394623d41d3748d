"""The step path: what a workflow does at each call, as I/O-free flows.

A flow here is a generator that yields :data:`Command` objects and receives their
results; :mod:`raftflow.engine.workflow.drivers` performs them, in the workflow's thread (sync
workflows) or on the worker's loop (async ones), so each path below exists once::

    workflow code        flow (this module)                          the driver performs
    -------------        ------------------                          -------------------
    (claimed)       -->  run_workflow: InvokeWorkflow -------------> the workflow function
    charge(order)   -->  call_step:
                          1. the previous call's staged record -----> SendCommit: committer,
                                                                     one fenced statement
                          2. the next call index: recorded? yes ---> (nothing: replayed)
                          3. not recorded: RunStep ----------------> the step function
                          4. stage its outcome (JSON); a failed attempt with a retry left is
                             committed at once and waited for (Pause, or a park: below)
                    <--   5. its result, or StepError
    return value    -->  run_workflow: the staged call and the outcome, one SendCommit

A transaction step (:func:`call_transaction`) stages its writes with its record; every
commit goes through :func:`send`, which rewinds the run (:func:`rewind`) when a commit
refused a transaction step's writes after the workflow went on with its result.

Waiting (:func:`wait_until`) is where the durable primitives meet the queue: a short wait
pauses in place (the lease is kept); a longer one commits with the next event *parked*
until the deadline and unwinds the run -- the execution then holds no lease, no slot and
costs no Raft entry until a claim wakes it (its deadline, or a signal, a child, a cancel
writing ``lock_expiry = now``). The primitives (:mod:`raftflow.engine.workflow.primitives`) are
flows built from these pieces, driven the same way.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from raftflow.engine.shards.partitions import key_route
from raftflow.engine.workflow.activation import Activation, Unwind
from raftflow.engine.workflow.context import StepInfo
from raftflow.engine.workflow.registry import StepDef
from raftflow.stores.commit import Commit, CommitOutcome
from raftflow.stores.records import StepRecord
from raftflow.transports.db.flow import Flow

from raftflow.errors import DatabaseError

T = TypeVar("T")

#: Waits up to this long pause in place, holding the lease; longer ones park the event.
SHORT_WAIT = 1.0
#: A rate-limited start later than this past its reserved time (a fraction of the period:
#: a stalled worker) reserves another, so that the starts in any window of W seconds stay
#: within ``limit * (W / per + 1)``.
RATE_LATENESS = 1.0


@dataclass(frozen=True, slots=True)
class InvokeWorkflow:
    """Call the workflow function; the reply is an :class:`Outcome`."""


@dataclass(frozen=True, slots=True)
class RunStep:
    """Run a step function (hooks around it, ``current_step()`` set, its ``timeout``);
    the reply is an :class:`Outcome`."""

    step: StepDef
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    info: StepInfo


@dataclass(frozen=True, slots=True)
class SendCommit:
    """Commit through the worker's committer; the reply is a ``CommitOutcome``."""

    commit: Commit


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` in place (the heartbeat keeps the lease); the reply is None."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Suspend:
    """The worker's turn is over: keep this run suspended until the worker claims the
    execution again (the reply is True: go on) or gives the continuation up (False)."""


@dataclass(frozen=True, slots=True)
class Io:
    """Run a database flow on the worker's connection; the reply is an :class:`Outcome`
    (a refusal such as "no such execution" is its error; a failure of the database is not:
    it hands the execution back)."""

    flow: Flow[Any]
    #: Sharded: the execution whose cluster runs it (a send to another's); None: this
    #: execution's own.
    route: str | None = None


Command = InvokeWorkflow | RunStep | SendCommit | Pause | Suspend | Io
StepFlow = Generator[Command, Any, T]


@dataclass(slots=True)
class Outcome:
    """What user code (or a refused request) returned or raised."""

    value: Any = None
    error: Exception | None = None
    continue_input: str | None = None  # the workflow called engine.continue_as_new


def run_workflow(run: Activation) -> StepFlow[None]:
    """The whole run: the workflow function, then its outcome's commit."""
    outcome: Outcome = yield InvokeWorkflow()
    if outcome.continue_input is not None and run.held:
        commit: Commit | None = run.continue_commit(outcome.continue_input)
    else:
        commit = run.final_commit(outcome.value, outcome.error)
    if commit is not None:
        run.conclude(commit, (yield from send(run, commit)))


def call_step(
    run: Activation, step: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> StepFlow[Any]:
    """One step call from workflow code: replayed from its record, or run (attempt after
    attempt, per its ``Retry``) and staged."""
    index, record = yield from call_begin(run, "step", step.name)
    while record is None or not record.done:
        if record is not None:  # retrying: the next attempt is due at wake_at
            yield from wait_until(run, record.wake_at or 0.0)
        attempt = 1 if record is None else record.attempts + 1
        if step.rate_limit is not None:  # wait for a start time under the limit
            yield from rate_wait(run, step, index, attempt, args, kwargs)
        started = run.now()
        info = StepInfo(run.execution_id, index, step.name, attempt)
        outcome: Outcome = yield RunStep(step, args, kwargs, info)
        error = outcome.error
        delay = retry_delay(step, record, attempt, error)
        if error is not None and delay is not None:
            record = run.stage_retry(step, index, attempt, started, error, delay, record)
            yield from flush(run)  # a crash now resumes with the next attempt, not this one
            continue
        record = run.stage_step(
            step, index, started, outcome.value, error, attempts=attempt, previous=record
        )
        return run.result(step, record, cause=error)
    return run.result(step, record)


def retry_delay(
    step: StepDef, record: StepRecord | None, attempt: int, error: Exception | None
) -> float | None:
    """The wait before the next attempt once attempt ``attempt`` failed with ``error``;
    None when it succeeded or the step's ``Retry`` gives up. ``record``: the step's record
    before this attempt -- a resumed step's ``Retry`` counts from the resume."""
    retry = step.retry
    if error is None or retry is None:
        return None
    counted = attempt - (0 if record is None else record.attempts_before_resume)
    return retry.delay_after(counted) if retry.retries(counted, error) else None


def rate_wait(
    run: Activation,
    step: StepDef,
    index: int,
    attempt: int,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> StepFlow[None]:
    """Wait for the start time reserved for this attempt under the step's rate limit:
    parked until just before it when it is far, the rest in place. A reservation is named
    by the execution, the call and the attempt, so the replay after a park finds its own.
    A start later than a whole period past its time (a stalled worker) gives that time up
    and reserves again, so late starts bunch up with at most one period's others."""
    limit = step.rate_limit
    assert limit is not None
    key = limit.key_for(step.name, args, kwargs)
    late = limit.per * RATE_LATENESS
    again = 0
    while True:
        token = f"{run.execution_id}:{index}:{attempt}" + (f":{again}" if again else "")
        flow = run.host.flows.reserve_rate(key, token, limit.limit, limit.per)
        # Sharded, the reservations of a key are all made on its own cluster: one bucket.
        outcome: Outcome = yield Io(flow, route=key_route(key))
        if outcome.error is not None:
            raise outcome.error
        at = float(outcome.value)
        yield from wait_until(run, at - SHORT_WAIT / 2)  # a long wait parks until then
        yield from wait_until(run, at)
        if run.now() <= at + late:
            return
        again += 1


def call_transaction(
    run: Activation, step: StepDef, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> StepFlow[Any]:
    """A transaction step's call (``@engine.transaction``): :func:`call_step`, with a fresh
    transaction as the first argument of each attempt. A successful attempt's writes are
    staged with its record and committed with it, with the next call as every step's
    record is (one request, one Raft entry: together or not at all). If that commit
    refuses them, the run rewinds to the step (:func:`rewind`)."""
    from raftflow.engine.workflow.transaction import AsyncTransaction, Transaction

    index, record = yield from call_begin(run, "step", step.name)
    while record is None or not record.done:
        if record is not None:  # retrying: the next attempt is due at wake_at
            yield from wait_until(run, record.wake_at or 0.0)
        attempt = 1 if record is None else record.attempts + 1
        started = run.now()
        info = StepInfo(run.execution_id, index, step.name, attempt)
        tx = AsyncTransaction(run) if step.is_async else Transaction(run)
        outcome: Outcome = yield RunStep(step, (tx, *args), kwargs, info)
        writes = tx.close()
        if tx.failure is not None:  # a read failed in the database: hand the run back
            raise run.give_up("a transaction step's read failed", tx.failure)
        error = outcome.error
        delay = retry_delay(step, record, attempt, error)
        if error is not None and delay is not None:
            record = run.stage_retry(step, index, attempt, started, error, delay, record)
            yield from flush(run)
            continue
        record = run.stage_step(
            step,
            index,
            started,
            outcome.value,
            error,
            attempts=attempt,
            previous=record,
            writes=writes,
        )
        return run.result(step, record, cause=error)
    return run.result(step, record)


def send(run: Activation, commit: Commit) -> StepFlow[CommitOutcome]:
    """Send a commit. One whose transaction step's writes were refused (``aborted``)
    applied nothing, and the workflow already went on with that step's result: rewind.
    One whose writes the database failed (``failed``: disk full, I/O...) applied nothing
    either, and is no outcome of the step: the execution is handed back."""
    outcome: CommitOutcome = yield SendCommit(commit)
    if outcome.aborted is not None:
        yield from rewind(run, commit, outcome.aborted)
    if outcome.failed is not None:
        failure = DatabaseError(outcome.failed)
        raise run.give_up("the database failed a transaction step's writes", failure)
    return outcome


def rewind(run: Activation, commit: Commit, reason: str) -> StepFlow[None]:
    """The transaction step staged in ``commit`` had its writes refused (``expect_rows``,
    a failing statement): nothing of the commit applied, and the lease still holds.
    Record the failed attempt instead -- ``retrying`` per its ``Retry``, else ``failed``
    -- hand the next event back, and unwind: whoever claims the execution next replays to
    the step, which then waits and runs its next attempt, or raises :class:`StepError`."""
    from raftflow.errors import TransactionAbortedError

    staged = run.sent
    assert staged is not None and commit.step_idx is not None and commit.step_name is not None
    step = run.host.registry.steps[commit.step_name]
    error = TransactionAbortedError(
        f"transaction step {step.name!r}: {reason}; nothing was written"
    )
    index, attempt, started = commit.step_idx, commit.step_attempts, staged.attempt_started
    delay = retry_delay(step, staged.previous, attempt, error)
    if delay is not None:
        run.stage_retry(step, index, attempt, started, error, delay, staged.previous)
    else:
        run.stage_step(
            step, index, started, None, error, attempts=attempt, previous=staged.previous
        )
    run.check_applied((yield SendCommit(replace(run.take_staged(), next_token=None))))
    run.held = False
    raise Unwind()


def call_begin(run: Activation, kind: str, name: str) -> StepFlow[tuple[int, StepRecord | None]]:
    """Begin a call: commit the previous call's record (past the workflow's deadline, end
    the run as cancelled instead), find the call's position and record, and make sure this
    worker holds the execution before it does anything new there."""
    if run.deadline_passed() and run.held:
        commit = run.cancel_commit("timeout")
        run.conclude(commit, (yield from send(run, commit)))
        raise Unwind()
    if run.staged is not None:
        yield from flush(run)
    index, record = run.next_call(kind, name)
    if (record is None or not record.done) and not run.held:
        yield from await_turn(run)
    return index, record


def flush(run: Activation) -> StepFlow[None]:
    """Commit the staged record now; the run goes on in its turn, or waits for the next."""
    run.check_applied((yield from send(run, run.take_staged())))
    if not run.held:
        yield from await_turn(run)


def await_turn(run: Activation) -> StepFlow[None]:
    """The worker's turn ended (or the run parked): suspend until the worker claims the
    execution again and finds nothing changed, then go on in memory -- no replay. If it
    gives the continuation up instead (another worker ran it, the cache evicted it, the
    worker stops), unwind: whoever claims it next replays to here."""
    if not (yield Suspend()):
        raise Unwind()


def wait_until(
    run: Activation,
    deadline: float,
    *,
    wake_topic: str | None = None,
    wake_child: str | None = None,
) -> StepFlow[None]:
    """Wait for ``deadline`` (and whatever else may wake the execution first): a short
    wait (up to ``SHORT_WAIT``; none under a virtual clock) pauses in place after
    committing what is staged; a longer one parks the next event and unwinds, to be
    replayed to here by whoever claims it next."""
    while (remaining := run.remaining(deadline)) > 0:
        if remaining > run.host.short_wait() or wake_topic is not None or wake_child is not None:
            yield from suspend(run, deadline, wake_topic=wake_topic, wake_child=wake_child)
            continue  # woken: look at the clock again (a wake may come early)
        if run.staged is not None:
            yield from flush(run)
        yield Pause(remaining)  # until the cluster's clock says so, not this machine's


def suspend(
    run: Activation,
    until: float,
    *,
    wake_topic: str | None = None,
    wake_child: str | None = None,
) -> StepFlow[None]:
    """Commit with the next event parked until ``until`` (at the latest the workflow's
    deadline), woken at once if a signal of ``wake_topic`` is unread or ``wake_child`` is
    finished, then wait for the turn that wakes it: the execution holds nothing while it
    waits. The caller looks again at what it waits for (a wake may be early)."""
    if run.record.deadline is not None:
        until = min(until, run.record.deadline)
    commit = run.take_staged(park_until=until, wake_topic=wake_topic, wake_child=wake_child)
    run.check_applied((yield from send(run, commit)))
    run.held = False
    yield from await_turn(run)
    if run.deadline_passed():  # woken by the workflow's deadline: end it as cancelled
        commit = run.cancel_commit("timeout")
        run.conclude(commit, (yield from send(run, commit)))
        raise Unwind()
