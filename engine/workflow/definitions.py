"""The decorators that define an engine's workflows, steps, transaction steps and schedules.

Part of :class:`~raftflow.engine.app.Engine`. A decorated step, called inside a workflow,
runs as a durable call (:mod:`raftflow.engine.workflow.steppath`); called anywhere else it
is the plain function (a transaction step, which needs the engine's transaction, refuses).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from importlib import import_module
from typing import Any, TypeVar, overload

from raftflow.engine.workflow.context import current_activation
from raftflow.engine.workflow.drivers import adrive, drive
from raftflow.engine.workflow.queues import DEFAULT_QUEUE, lane
from raftflow.engine.workflow.ratelimit import RateLimit
from raftflow.engine.workflow.registry import Registry, StepDef, WorkflowDef
from raftflow.engine.workflow.retry import Retry
from raftflow.engine.workflow.schedule import DEFAULT_CATCH_UP, Schedule, check_input
from raftflow.engine.workflow.steppath import call_step, call_transaction

from raftflow.errors import ConfigurationError, NotInWorkflowError

F = TypeVar("F", bound=Callable[..., Any])


class Definitions:
    """``@engine.workflow``, ``@engine.step``, ``@engine.transaction``, ``@engine.scheduled``."""

    registry: Registry
    #: Cron schedules by workflow name (``@engine.scheduled``); fired by the workers.
    schedules: dict[str, Schedule]

    @overload
    def workflow(self, fn: F, /) -> F: ...

    @overload
    def workflow(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        timeout: float | None = None,
        concurrency: int | None = None,
        concurrency_key: Callable[[Any], str] | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> Callable[[F], F]: ...

    def workflow(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        timeout: float | None = None,
        concurrency: int | None = None,
        concurrency_key: Callable[[Any], str] | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> Any:
        """Register a workflow: a sync or async function of one input argument.

        ``queue``: the named queue its executions wait in (``"default"``). A worker claims
        only executions of the workflows it registers, in the queues it serves
        (``run_worker(queues=[...])``, ``raftflow worker --queue``).

        ``timeout`` (seconds): an execution still running that long after its start is
        cancelled (status ``cancelled``, reason "timeout") at its next step boundary, or
        at once while it waits. Calling the function directly runs it as plain Python.

        ``concurrency=N``: at most N executions of this workflow run at once across the
        cluster -- per value of ``concurrency_key(input)`` when given (a function of the
        workflow's input returning a str). An execution holds its slot from its first
        claim until it finishes (a sleep keeps it); the others wait in the queue in start
        order, never claimed, costing nothing until a slot frees.
        """

        def register(fn: F) -> F:
            definition = WorkflowDef.of(
                fn,
                name,
                timeout=timeout,
                concurrency=concurrency,
                concurrency_key=concurrency_key,
                queue=queue,
            )
            self.registry.add_workflow(definition)
            fn.__raftflow_workflow__ = definition.name  # type: ignore[attr-defined]
            return fn

        return register(fn) if fn is not None else register

    def limit_queue(
        self, queue: str, *, concurrency: int | None = None, rate: RateLimit | None = None
    ) -> None:
        """Limits of the named ``queue``, cluster-wide, shared by its workflows.

        ``concurrency=N``: at most N of its executions admitted at once, as
        ``@engine.workflow(concurrency=N)`` limits one workflow's: an execution holds its
        slot from its first claim until it finishes (a sleep keeps it); the others wait in
        the queue in start order, never claimed. A workflow with a limit of its own cannot
        be in a queue with one (an execution holds one limit).
        ``rate=RateLimit(n, per=seconds)``: at most n of its executions *begin* (run their
        first call) per period, in claim order; the others wait, parked, holding no slot.
        Declare them where the workflows are: the process that starts an execution applies
        the concurrency limit (a Client by name: as the workers publish it), the workers
        apply the rate."""
        self.registry.limit_queue(queue, concurrency, rate)

    def scheduled(
        self,
        cron: str,
        /,
        *,
        timezone: str = "UTC",
        catch_up: int = DEFAULT_CATCH_UP,
        name: str | None = None,
        timeout: float | None = None,
        queue: str = DEFAULT_QUEUE,
    ) -> Callable[[F], F]:
        """Start the decorated workflow at each time of ``cron``, cluster-wide, once per
        time: the execution of a time has the id ``"<workflow>@<ISO time>"`` and the time
        (an aware ``datetime`` in ``timezone``) as its input.

        ``cron`` has five fields (minute hour day-of-month month day-of-week) or six with
        seconds first (``"*/10 * * * * *"``: every ten seconds). After a time when no
        worker ran, the worker that finds the schedule due starts the latest due time and
        up to ``catch_up`` earlier missed ones; older ones are skipped (and logged). Put it
        above ``@engine.workflow``, or alone (it then registers the workflow, with
        ``name``, ``timeout`` and ``queue``). Workers that serve the workflow's queue make
        the schedule exist when they start, and only they fire it.
        """
        schedule_args = (cron, timezone, catch_up)
        Schedule.of("check", *schedule_args)  # a bad spec fails here, at decoration

        def register(fn: F) -> F:
            workflow_name = getattr(fn, "__raftflow_workflow__", None)
            if not isinstance(workflow_name, str):
                fn = self.workflow(name=name, timeout=timeout, queue=queue)(fn)
                workflow_name = fn.__raftflow_workflow__  # type: ignore[attr-defined]
            elif name is not None or timeout is not None or queue != DEFAULT_QUEUE:
                raise ConfigurationError(
                    "name, timeout and queue belong to @engine.workflow when it is applied too"
                )
            definition = self.registry.workflows[workflow_name]
            schedule = Schedule.of(workflow_name, *schedule_args)
            check_input(schedule, definition)
            self.schedules[workflow_name] = replace(
                schedule, lane=lane(definition.queue, definition.name)
            )
            return fn

        return register

    @overload
    def step(self, fn: F, /) -> F: ...

    @overload
    def step(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
        rate_limit: RateLimit | None = None,
    ) -> Callable[[F], F]: ...

    def step(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
        rate_limit: RateLimit | None = None,
    ) -> Any:
        """Register a step: its result is checkpointed, so it runs once per execution
        (at least once: again only if a worker dies before recording it).

        Inside a workflow a step call returns the recorded result when there is one. In an
        async workflow, await every step (a sync step then runs in a thread). Outside a
        workflow, or inside another step, a step is a plain function call. ``retry``: run
        it again after a failure (:class:`~raftflow.engine.workflow.retry.Retry`);
        ``timeout``: an attempt running longer fails with :class:`StepTimeoutError` (an
        async step is cancelled; a sync step's thread cannot be, and its late result is
        dropped). ``rate_limit``: at most so many starts (attempts) per period
        cluster-wide, per key (:class:`~raftflow.engine.workflow.ratelimit.RateLimit`); a
        call over it waits for its turn.
        """

        def register(fn: F) -> F:
            definition = StepDef.of(fn, name, retry=retry, timeout=timeout, rate_limit=rate_limit)
            self.registry.add_step(definition)
            return _durable(fn, definition, call_step, outside=fn)  # type: ignore[return-value]

        return register(fn) if fn is not None else register

    @overload
    def transaction(self, fn: F, /) -> F: ...

    @overload
    def transaction(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
    ) -> Callable[[F], F]: ...

    def transaction(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Register a transaction step: a step whose SQL commits with its checkpoint.

        Its first parameter is a :class:`~raftflow.engine.workflow.transaction.Transaction`
        (an :class:`~raftflow.engine.workflow.transaction.AsyncTransaction` for an ``async
        def``) that the engine passes: the workflow calls ``debit(account, amount)``. Reads
        (``tx.query``, ``tx.first``, ``tx.scalar``) run at once and see committed state;
        writes (``tx.execute``) are buffered and sent with the step's checkpoint in one
        request (one Raft entry): the step's writes apply exactly once, with its record,
        or not at all. ``expect_rows=n`` aborts the attempt (nothing written) when a write
        changes another number of rows; an aborted attempt fails with
        :class:`TransactionAbortedError`, retried per ``retry``, then :class:`StepError`.

        Only inside a workflow (elsewhere :class:`NotInWorkflowError`); ``fn.__wrapped__``
        is the plain function, to unit-test with a transaction of your own.
        """

        def register(fn: F) -> F:
            definition = StepDef.of(fn, name, retry=retry, timeout=timeout)
            self.registry.add_step(definition)
            # SQLAlchemy's compiler now, with the app, rather than in a first step's time.
            import_module("raftflow.engine.workflow.sqlcompile")

            def outside(*args: Any, **kwargs: Any) -> Any:
                raise NotInWorkflowError(
                    f"transaction step {definition.name!r} runs only inside a workflow (the "
                    "engine passes its transaction); to test the function alone, call "
                    f"{fn.__name__}.__wrapped__(tx, ...)"
                )

            return _durable(fn, definition, call_transaction, outside)  # type: ignore[return-value]

        return register(fn) if fn is not None else register


def _durable(
    fn: Callable[..., Any],
    definition: StepDef,
    path: Callable[..., Any],
    outside: Callable[..., Any],
) -> Callable[..., Any]:
    """``fn`` as a durable call inside a workflow (``path``: its flow) and ``outside`` it."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        activation = current_activation()
        if activation is None:
            return outside(*args, **kwargs)
        flow = path(activation, definition, args, kwargs)
        return adrive(activation, flow) if activation.is_async else drive(activation, flow)

    call.__raftflow_step__ = definition.name  # type: ignore[attr-defined]
    return call
