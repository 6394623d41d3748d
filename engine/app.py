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
from typing import Any, TypeVar, overload

from raftflow.engine.activation import current
from raftflow.engine.errors import (
    ConfigurationError,
    ExecutionConflictError,
    ExecutionNotFoundError,
)
from raftflow.engine.events import RUN
from raftflow.engine.handle import WorkflowHandle
from raftflow.engine.hooks import Hooks
from raftflow.engine.registry import Registry, StepDef, WorkflowDef
from raftflow.engine.worker import Worker, WorkerOptions
from raftflow.stores.base import ExecutionRecord, Status
from raftflow.stores.sql import AsyncSqlStore, SqlStore
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.sql import AsyncSqlTransport, SqlTransport

log = logging.getLogger("raftflow")

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

DEFAULT_URL = "sqlite:///raftflow.db"


def open_backend(url: str, **options: Any) -> tuple[SqlTransport, SqlStore]:
    """A transport and a store sharing one connection, chosen by the URL's scheme:
    ``http(s)://`` (rqlite) or ``sqlite:///path`` (a local file)."""
    if not isinstance(url, str):
        raise ConfigurationError(f"a backend URL must be a str, not {type(url).__name__}")
    scheme = url.split(":", 1)[0].lower()
    if scheme in ("http", "https", "rqlite", "rqlites"):
        from raftflow.stores.rqlite import RqliteStore
        from raftflow.transports.rqlite import RqliteTransport

        transport = RqliteTransport.from_url(url, create_schema=False, **options)
        try:
            return transport, RqliteStore.for_transport(transport)
        except BaseException:
            transport.close()
            raise
    if scheme == "sqlite":
        if options:
            raise ConfigurationError(f"sqlite URLs take no options, got {sorted(options)}")
        from raftflow.stores.sqlite import SqliteStore
        from raftflow.transports.sqlite import SqliteTransport

        sqlite_transport = SqliteTransport.from_url(url, create_schema=False)
        return sqlite_transport, SqliteStore.for_transport(sqlite_transport)
    raise ConfigurationError(
        f"unsupported backend URL {scheme + ':...'!r}: use http(s)://host:port for rqlite "
        "or sqlite:///path.db for a local file"
    )


class Engine:
    """Durable workflows as Python functions.

    ``Engine()`` runs on a local SQLite file (``raftflow.db``), ``Engine.from_url(url)``
    on rqlite (``http://host:4001``) or SQLite (``sqlite:///path.db``), and
    ``Engine(transport=..., store=...)`` on the two given, which must share one database.
    Without an explicit backend the engine connects on first use, so a module can define
    ``engine = Engine()`` and a worker can still point it elsewhere (``connect(url)``).
    """

    def __init__(
        self,
        transport: SqlTransport | None = None,
        store: SqlStore | None = None,
        *,
        url: str | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        self.registry = Registry()
        self.max_payload_bytes = max_payload_bytes
        self.hooks: list[Hooks] = []
        self._url = url
        self._lock = threading.Lock()
        self._transport: SqlTransport | None = None
        self._store: SqlStore | None = None
        if transport is not None or store is not None:
            self._bind(transport, store)

    @classmethod
    def from_url(cls, url: str = DEFAULT_URL, **options: Any) -> Engine:
        """An engine connected now to ``url`` (options go to the rqlite transport)."""
        engine = cls(url=url)
        engine._bind(*open_backend(url, **options))
        return engine

    # -- backend --------------------------------------------------------------------------

    def connect(self, url: str, **options: Any) -> None:
        """Point this engine at ``url`` (replacing a backend it opened itself)."""
        transport, store = open_backend(url, **options)
        with self._lock:
            old = (self._transport, self._store)
            self._transport = self._store = None
            self._url = url
            self._bind(transport, store)
        _close_pair(*old)

    def _bind(self, transport: SqlTransport | None, store: SqlStore | None) -> None:
        if transport is None or store is None:
            raise ConfigurationError(
                "pass both transport= and store= (or neither, for the default SQLite file)"
            )
        if not isinstance(transport, SqlTransport) or not isinstance(store, SqlStore):
            raise ConfigurationError(
                "transport and store must be raftflow backends (RqliteTransport/RqliteStore "
                "or SqliteTransport/SqliteStore)"
            )
        if transport.connection.identity != store.connection.identity:
            raise ConfigurationError(
                "the transport and the store must live in one database (the same rqlite "
                "cluster or SQLite file): a step's checkpoint, the ack of its event and the "
                "publish of the next are one atomic commit"
            )
        store.create_schema()
        self._transport, self._store = transport, store

    def _backend(self) -> tuple[SqlTransport, SqlStore]:
        with self._lock:
            if self._transport is None or self._store is None:
                self._bind(*open_backend(self._url or DEFAULT_URL))
            assert self._transport is not None and self._store is not None
            return self._transport, self._store

    @property
    def transport(self) -> SqlTransport:
        return self._backend()[0]

    @property
    def store(self) -> SqlStore:
        return self._backend()[1]

    def _async_backend(self) -> tuple[AsyncSqlTransport, AsyncSqlStore]:
        """Async twins on one new async connection, for a worker's event loop."""
        transport, store = self._backend()
        connection = transport.connection.to_async()
        return AsyncSqlTransport(connection, transport.flows), AsyncSqlStore(
            connection, store.flows
        )

    def close(self) -> None:
        with self._lock:
            pair = (self._transport, self._store)
            self._transport = self._store = None
        _close_pair(*pair)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def add_hooks(self, hooks: Hooks) -> None:
        """Register worker lifecycle hooks (metrics, tracing); see :mod:`raftflow.engine.hooks`."""
        if not isinstance(hooks, Hooks):
            raise ConfigurationError("hooks must subclass engine.hooks.Hooks")
        self.hooks.append(hooks)

    # -- definitions ----------------------------------------------------------------------

    @overload
    def workflow(self, fn: F, /) -> F: ...

    @overload
    def workflow(self, fn: None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...

    def workflow(self, fn: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
        """Register a workflow: a sync or async function of one input argument.

        Calling the function directly still runs it as plain Python (steps included).
        """

        def register(fn: F) -> F:
            definition = WorkflowDef.of(fn, name)
            self.registry.add_workflow(definition)
            fn.__raftflow_workflow__ = definition.name  # type: ignore[attr-defined]
            return fn

        return register(fn) if fn is not None else register

    @overload
    def step(self, fn: F, /) -> F: ...

    @overload
    def step(self, fn: None = None, /, *, name: str | None = None) -> Callable[[F], F]: ...

    def step(self, fn: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
        """Register a step: its result is checkpointed, so it runs once per execution
        (at least once: again only if a worker dies before recording it).

        Inside a workflow a step call returns the recorded result when there is one. In an
        async workflow, await every step (a sync step then runs in a thread). Outside a
        workflow, or inside another step, a step is a plain function call.
        """

        def register(fn: F) -> F:
            definition = StepDef.of(fn, name)
            self.registry.add_step(definition)
            return _step_wrapper(fn, definition)  # type: ignore[return-value]

        return register(fn) if fn is not None else register

    # -- executions -----------------------------------------------------------------------

    @overload
    def start(
        self,
        workflow: Callable[..., Coroutine[Any, Any, T]],
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
    ) -> WorkflowHandle[T]: ...

    @overload
    def start(
        self,
        workflow: Callable[..., T],
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
    ) -> WorkflowHandle[T]: ...

    @overload
    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
    ) -> WorkflowHandle[Any]: ...

    def start(
        self,
        workflow: Any,
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
    ) -> WorkflowHandle[Any]:
        """Start an execution of ``workflow`` (a registered function or its name).

        The input is validated against the workflow's annotation here (nothing is written
        when it fails). With ``execution_id`` the call is idempotent: an execution that
        exists is returned as it is (``handle.created`` is False). ``priority`` (0-4) is
        the queue priority; workers with ``min_priority`` only take executions at or above.
        One request: the execution's record and its first event are written atomically.
        """
        definition = self.registry.workflow(workflow)
        payload = definition.encode_input(input)
        execution_id = uuid.uuid4().hex if execution_id is None else execution_id
        outcome = self.store.start(
            execution_id, definition.name, payload, priority=priority, event=RUN
        )
        if not outcome.created and outcome.record.workflow != definition.name:
            raise ExecutionConflictError(
                f"execution {execution_id!r} exists and runs {outcome.record.workflow!r}, "
                f"not {definition.name!r}"
            )
        return WorkflowHandle(self, execution_id, created=outcome.created)

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


def _step_wrapper(fn: Callable[..., Any], definition: StepDef) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        activation = current()
        if activation is None:
            return fn(*args, **kwargs)
        if activation.is_async:
            return activation.acall_step(definition, args, kwargs)
        return activation.call_step(definition, args, kwargs)

    call.__raftflow_step__ = definition.name  # type: ignore[attr-defined]
    return call


def _close_pair(transport: SqlTransport | None, store: SqlStore | None) -> None:
    if store is not None and (transport is None or store.connection is not transport.connection):
        store.close()
    if transport is not None:
        transport.close()
