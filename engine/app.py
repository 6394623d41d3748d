"""Engine: register workflows and steps, start executions, run workers."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator
from datetime import timedelta
from importlib import import_module
from typing import Any, TypeVar, overload

from raftflow.engine.backend import Backend, Claimed, open_backend
from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.runtime.hooks import HookChain, Hooks
from raftflow.engine.runtime.local import LocalWorkers
from raftflow.engine.runtime.retention import DEFAULT_RETENTION, check_retention
from raftflow.engine.runtime.schedules import (
    DEFAULT_CATCH_UP,
    Schedule,
    ScheduleFlows,
    ScheduleInfo,
    check_execution_id,
    check_input,
)
from raftflow.engine.runtime.worker import Worker, WorkerOptions
from raftflow.engine.workflow import primitives
from raftflow.engine.workflow.context import current_activation
from raftflow.engine.workflow.drivers import adrive, drive
from raftflow.engine.workflow.durable import DurableCalls
from raftflow.engine.workflow.events import RUN
from raftflow.engine.workflow.ratelimit import RateLimit
from raftflow.engine.workflow.registry import Registry, StepDef, WorkflowDef
from raftflow.engine.workflow.retry import Retry
from raftflow.engine.workflow.steppath import call_step, call_transaction
from raftflow.stores.contract import ExecutionRecord, Status
from raftflow.stores.store import SqlStore
from raftflow.transports.contract import Lease
from raftflow.transports.payload import MAX_PAYLOAD_BYTES, check_priority, check_seconds
from raftflow.transports.transport import SqlTransport

from raftflow.errors import (
    ConfigurationError,
    ExecutionConflictError,
    ExecutionNotFoundError,
    InvalidArgumentError,
    NotInWorkflowError,
)

log = logging.getLogger("raftflow")

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

DEFAULT_URL = "sqlite:///raftflow.db"
DEFAULT_MAX_HISTORY = 50_000


class Engine(DurableCalls):
    """Durable workflows as Python functions.

    ``Engine()`` runs on a local SQLite file (``raftflow.db``), ``Engine.from_url(url)``
    on rqlite (``http://host:4001``) or SQLite (``sqlite:///path.db``). Without a URL the
    engine connects on first use, so a module can define ``engine = Engine()`` and a
    worker can still point it elsewhere (``engine.connect(url)``). ``max_payload_bytes``
    bounds every JSON payload it stores: inputs, step results, outputs; ``max_history``
    the calls one run of a workflow may record (a warning is logged at 80%, and the call
    past the limit raises :class:`HistoryLimitError`); ``retention`` how long finished
    executions are kept before the workers delete them (None: for ever; see
    :mod:`raftflow.engine.runtime.retention`).

    On connect the database's schema version is checked: an empty database is initialized,
    an older one is migrated only with ``auto_migrate`` (default: yes for SQLite, no for
    rqlite, where an operator runs ``raftflow migrate`` first), a newer one is refused.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        auto_migrate: bool | None = None,
        max_history: int = DEFAULT_MAX_HISTORY,
        retention: timedelta | None = DEFAULT_RETENTION,
        **options: Any,
    ) -> None:
        if (
            isinstance(max_payload_bytes, bool)
            or not isinstance(max_payload_bytes, int)
            or max_payload_bytes < 1
        ):
            raise ConfigurationError("max_payload_bytes must be a positive int")
        self.registry = Registry()
        self.max_payload_bytes = max_payload_bytes
        if isinstance(max_history, bool) or not isinstance(max_history, int) or max_history < 1:
            raise ConfigurationError("max_history must be a positive int")
        #: Calls one run of a workflow may record (warned at 80%): see continue_as_new.
        self.max_history = max_history
        #: Finished executions older than this are deleted by the workers (None: never).
        self.retention = check_retention(retention)
        self.hooks: list[Hooks] = []
        #: Cron schedules by workflow name (@engine.scheduled); fired by the workers.
        self.schedules: dict[str, Schedule] = {}
        #: The workers this engine runs in this process (the start fast path: runtime/local.py).
        self.local = LocalWorkers()
        self._url = url
        self._options = options
        self.auto_migrate = auto_migrate
        self._lock = threading.Lock()
        self._backend: Backend | None = None

    @classmethod
    def from_url(
        cls,
        url: str = DEFAULT_URL,
        *,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        auto_migrate: bool | None = None,
        retention: timedelta | None = DEFAULT_RETENTION,
        **options: Any,
    ) -> Engine:
        """An engine connected now to ``url``; ``options`` go to the rqlite connection
        (``verify``, ``timeout``, ``retry_timeout``, ``connect_timeout``, ``http``)."""
        engine = cls(
            url=url,
            max_payload_bytes=max_payload_bytes,
            auto_migrate=auto_migrate,
            retention=retention,
            **options,
        )
        _ = engine.backend
        return engine

    # -- backend --------------------------------------------------------------------------

    def connect(self, url: str, **options: Any) -> None:
        """Point this engine at ``url`` (closing the backend it had opened)."""
        backend = open_backend(
            url, max_payload_bytes=self.max_payload_bytes, auto_migrate=self.auto_migrate, **options
        )
        with self._lock:
            old, self._backend = self._backend, backend
            self._url, self._options = url, options
        if old is not None:
            old.close()

    @property
    def backend(self) -> Backend:
        """The database this engine uses, opened (and its schema created) on first use."""
        with self._lock:
            if self._backend is None:
                self._backend = open_backend(
                    self._url or DEFAULT_URL,
                    max_payload_bytes=self.max_payload_bytes,
                    auto_migrate=self.auto_migrate,
                    **self._options,
                )
            return self._backend

    @property
    def transport(self) -> SqlTransport:
        """The queue, as the public transport API (a view sharing the engine's connection)."""
        backend = self.backend
        return SqlTransport(backend.database, flows=backend.queue)

    @property
    def store(self) -> SqlStore:
        """Executions and steps, as the public store API (a view on the engine's connection)."""
        backend = self.backend
        return SqlStore(backend.database, flows=backend.store)

    def close(self) -> None:
        with self._lock:
            backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def add_hooks(self, hooks: Hooks) -> None:
        """Register worker lifecycle hooks: metrics, tracing (:class:`Hooks`)."""
        if not isinstance(hooks, Hooks):
            raise ConfigurationError("hooks must subclass raftflow.Hooks")
        self.hooks.append(hooks)

    # -- definitions ----------------------------------------------------------------------

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
    ) -> Any:
        """Register a workflow: a sync or async function of one input argument.

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
                fn, name, timeout=timeout, concurrency=concurrency, concurrency_key=concurrency_key
            )
            self.registry.add_workflow(definition)
            fn.__raftflow_workflow__ = definition.name  # type: ignore[attr-defined]
            return fn

        return register(fn) if fn is not None else register

    def scheduled(
        self,
        cron: str,
        /,
        *,
        timezone: str = "UTC",
        catch_up: int = DEFAULT_CATCH_UP,
        name: str | None = None,
        timeout: float | None = None,
    ) -> Callable[[F], F]:
        """Start the decorated workflow at each time of ``cron``, cluster-wide, once per
        time: the execution of a time has the id ``"<workflow>@<ISO time>"`` and the time
        (an aware ``datetime`` in ``timezone``) as its input.

        ``cron`` has five fields (minute hour day-of-month month day-of-week) or six with
        seconds first (``"*/10 * * * * *"``: every ten seconds). After a time when no
        worker ran, the worker that finds the schedule due starts the latest due time and
        up to ``catch_up`` earlier missed ones; older ones are skipped (and logged). Put it
        above ``@engine.workflow``, or alone (it then registers the workflow, with
        ``name`` and ``timeout``). Workers make the schedule exist when they start.
        """
        schedule_args = (cron, timezone, catch_up)
        Schedule.of("check", *schedule_args)  # a bad spec fails here, at decoration

        def register(fn: F) -> F:
            workflow_name = getattr(fn, "__raftflow_workflow__", None)
            if not isinstance(workflow_name, str):
                fn = self.workflow(name=name, timeout=timeout)(fn)
                workflow_name = fn.__raftflow_workflow__  # type: ignore[attr-defined]
            elif name is not None or timeout is not None:
                raise ConfigurationError(
                    "name and timeout belong to @engine.workflow when it is applied too"
                )
            schedule = Schedule.of(workflow_name, *schedule_args)
            check_input(schedule, self.registry.workflows[workflow_name])
            self.schedules[workflow_name] = schedule
            return fn

        return register

    def list_schedules(self) -> list[ScheduleInfo]:
        """The schedules the database holds (of any app), with the time each waits for."""
        return self.backend.run(ScheduleFlows(self.backend.queue.clock).list())

    def remove_schedule(self, workflow: Any) -> bool:
        """Delete a workflow's schedule from the database (a workflow function or its
        name); False if it had none. Workers that still register it make it again within
        10 s: remove ``@engine.scheduled`` from the code first."""
        name = workflow if isinstance(workflow, str) else self.registry.workflow(workflow).name
        return self.backend.run(ScheduleFlows(self.backend.queue.clock).remove(name))

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
        it again after a failure (:class:`~raftflow.engine.workflow.retry.Retry`); ``timeout``: an
        attempt running longer fails with :class:`StepTimeoutError` (an async step is
        cancelled; a sync step's thread cannot be, and its late result is dropped).
        ``rate_limit``: at most so many starts (attempts) per period cluster-wide, per key
        (:class:`~raftflow.engine.workflow.ratelimit.RateLimit`); a call over it waits for its turn.
        """

        def register(fn: F) -> F:
            definition = StepDef.of(fn, name, retry=retry, timeout=timeout, rate_limit=rate_limit)
            self.registry.add_step(definition)
            return _step_wrapper(fn, definition)  # type: ignore[return-value]

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

        Its first parameter is a :class:`~raftflow.engine.workflow.transaction.Transaction` (an
        :class:`~raftflow.engine.workflow.transaction.AsyncTransaction` for an ``async def``) that
        the engine passes: the workflow calls ``debit(account, amount)``. Reads
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
            return _transaction_wrapper(fn, definition)  # type: ignore[return-value]

        return register(fn) if fn is not None else register

    def create_tables(self, metadata: Any) -> None:
        """Create the tables (and indexes) of a SQLAlchemy ``MetaData`` in the engine's
        database, ``IF NOT EXISTS``, in one request (one transaction): the application's
        tables that transaction steps write live beside raftflow's own."""
        from raftflow.engine.workflow.transaction import create_tables_request
        from raftflow.transports.db.flow import single

        self.backend.database.run(single(create_tables_request(metadata)))

    # -- executions -----------------------------------------------------------------------

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
        limit = definition.limit(payload)
        if debounce is not None:
            debounce = _debounce(debounce, execution_id, limit)
        run = self._maybe_workflow("start", False)
        if run is not None:
            if debounce is not None:
                raise InvalidArgumentError("debounce is for starts outside a workflow")
            flow = primitives.start_child(run, definition, payload, execution_id, priority, limit)
            return WorkflowHandle(self, drive(run, flow))
        execution_id = uuid.uuid4().hex if execution_id is None else execution_id
        check_execution_id(execution_id)
        check_priority(priority)
        # A worker of this process with a free slot (the fast path) -- not for an execution
        # that may have to wait: for a slot of its limit, or for its debounce.
        fast = limit is None and debounce is None
        local = self.local.reserve(priority) if fast else None
        token = None if local is None else f"{local.worker_id}:{uuid.uuid4().hex}"
        try:
            outcome = self.store.database.run(
                self.store.flows.start(
                    execution_id,
                    definition.name,
                    payload,
                    priority,
                    RUN,
                    timeout=definition.timeout,
                    lease_token=token,
                    visibility=local.options.visibility if local is not None else 30.0,
                    trace_context=HookChain(self.hooks).trace_context() if self.hooks else None,
                    limit=limit,
                    debounce=debounce,
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
        return WorkflowHandle(self, execution_id, created=outcome.created)

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
        run = self._maybe_workflow("start", True)
        if run is None:
            return await asyncio.to_thread(
                functools.partial(
                    self.start,
                    workflow,
                    input,
                    execution_id=execution_id,
                    priority=priority,
                    debounce=debounce,
                )
            )
        if debounce is not None:
            raise InvalidArgumentError("debounce is for starts outside a workflow")
        definition = self.registry.workflow(workflow)
        payload = definition.encode_input(input)
        limit = definition.limit(payload)
        flow = primitives.start_child(run, definition, payload, execution_id, priority, limit)
        return WorkflowHandle(self, await adrive(run, flow))

    def get(self, execution_id: str) -> WorkflowHandle[Any]:
        """The handle of an existing execution; :class:`ExecutionNotFoundError` otherwise."""
        if self.store.get(execution_id) is None:
            raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
        return WorkflowHandle(self, execution_id, created=False)

    def list(self, status: Status | str | None = None, limit: int = 100) -> list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return self.store.list(status=None if status is None else Status(status), limit=limit)

    # -- workers --------------------------------------------------------------------------

    def worker(self, **options: Any) -> Worker:
        """A worker for this engine (see :class:`WorkerOptions` for the options)."""
        return Worker(self, WorkerOptions(**options))

    def run_worker(
        self,
        concurrency: int = 4,
        worker_id: str | None = None,
        min_priority: int = 0,
        **options: Any,
    ) -> None:
        """Run a worker in this thread until SIGINT or SIGTERM.

        The first signal drains: no new claims, running steps finish and release their
        executions (up to ``drain_timeout``). A second signal exits at once; leases then
        lapse and other workers take over after ``visibility`` seconds.
        """
        worker = self.worker(
            concurrency=concurrency, worker_id=worker_id, min_priority=min_priority, **options
        )

        async def main() -> None:
            loop = asyncio.get_running_loop()
            signals = 0

            def on_signal() -> None:
                nonlocal signals
                signals += 1
                if signals > 1:
                    log.warning("second signal: exiting without draining")
                    os._exit(1)
                log.info("signal received: draining")
                worker.stop()

            if threading.current_thread() is threading.main_thread():
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, on_signal)
            await worker.run()

        asyncio.run(main())

    @contextlib.contextmanager
    def running_worker(self, **options: Any) -> Iterator[Worker]:
        """Run a worker in a background thread for the duration of a ``with`` block
        (tests, demos, single-process apps); it drains and stops on exit."""
        worker = self.worker(**options)
        ready = threading.Event()
        failure: list[BaseException] = []

        def target() -> None:
            try:
                asyncio.run(worker.run(on_ready=ready.set))
            except BaseException as exc:  # reported to the caller below
                failure.append(exc)
                ready.set()

        thread = threading.Thread(target=target, name="raftflow-worker", daemon=True)
        thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        try:
            yield worker
        finally:
            worker.stop()
            thread.join()
            if failure:
                raise failure[0]

    def __repr__(self) -> str:
        return f"<Engine workflows={sorted(self.registry.workflows)}>"


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


def _step_wrapper(fn: Callable[..., Any], definition: StepDef) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        activation = current_activation()
        if activation is None:
            return fn(*args, **kwargs)
        flow = call_step(activation, definition, args, kwargs)
        return adrive(activation, flow) if activation.is_async else drive(activation, flow)

    call.__raftflow_step__ = definition.name  # type: ignore[attr-defined]
    return call


def _transaction_wrapper(fn: Callable[..., Any], definition: StepDef) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        activation = current_activation()
        if activation is None:
            raise NotInWorkflowError(
                f"transaction step {definition.name!r} runs only inside a workflow (the "
                "engine passes its transaction); to test the function alone, call "
                f"{fn.__name__}.__wrapped__(tx, ...)"
            )
        flow = call_transaction(activation, definition, args, kwargs)
        return adrive(activation, flow) if activation.is_async else drive(activation, flow)

    call.__raftflow_step__ = definition.name  # type: ignore[attr-defined]
    return call
