"""Engine: a transport and a store, the workflows and steps registered with it, its workers.

The engine is built on two contracts: the queue that delivers each execution's events
(:class:`~raftflow.transports.transport.SqlTransport`: :class:`~raftflow.RqliteTransport` on
rqlite) and the store that keeps its state (:class:`~raftflow.stores.store.SqlStore`:
:class:`~raftflow.RqliteStore`). ``Engine(transport=..., store=...)`` is the composition;
``Engine.from_url(url)`` and ``Engine()`` build exactly that pair on one database, the store
sharing the transport's connection so that a step's commit also acks its event and
publishes the next, in one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

from raftflow.engine.client.calls import ClientCalls
from raftflow.engine.runtime.hooks import Hooks
from raftflow.engine.runtime.local import LocalWorkers
from raftflow.engine.runtime.retention import DEFAULT_RETENTION, check_retention
from raftflow.engine.runtime.worker import Worker, WorkerOptions
from raftflow.engine.shards.deployment import Shard, Shards, open_shards
from raftflow.engine.workflow.definitions import Definitions
from raftflow.engine.workflow.durable import DurableCalls
from raftflow.engine.workflow.registry import Registry
from raftflow.engine.workflow.schedule import Schedule
from raftflow.stores.store import SqlStore
from raftflow.transports.db.database import ConnectOptions, check_connect_options
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.transport import SqlTransport
from typing_extensions import Unpack

from raftflow.errors import ConfigurationError

log = logging.getLogger("raftflow")

DEFAULT_URL = "sqlite:///raftflow.db"
DEFAULT_MAX_HISTORY = 50_000


class Engine(Definitions, DurableCalls, ClientCalls):
    """Durable workflows as Python functions.

    ``Engine()`` runs on a local SQLite file (``raftflow.db``), ``Engine.from_url(url)``
    on rqlite (``http://host:4001``) or SQLite (``sqlite:///path.db``), and
    ``Engine(transport=RqliteTransport.from_url(url), store=RqliteStore.from_url(url))``
    on a transport and a store built by hand (they must reach one database). Without
    either, the engine connects on first use, so a module can define ``engine = Engine()``
    and a worker can still point it elsewhere (``engine.connect(url)``).

    ``max_payload_bytes`` bounds every JSON payload it stores: inputs, step results,
    outputs; ``max_history`` the calls one run of a workflow may record (a warning is
    logged at 80%, and the call past the limit raises :class:`HistoryLimitError`);
    ``retention`` how long finished executions are kept before the workers delete them
    (None: for ever; see :mod:`raftflow.engine.runtime.retention`). The connection
    ``options`` are :class:`~raftflow.transports.db.database.ConnectOptions`.

    ``version``: the version of this code. Each execution is pinned to the version that
    started it and run only by workers of that version (so a deploy never replays a
    history other code recorded); by default a hash of the source of the registered
    workflows. Give one (a release number) to decide yourself when code is compatible.

    On connect the database's schema version is checked: an empty database is initialized,
    an older one is migrated only with ``auto_migrate`` (default: yes for SQLite, no for
    rqlite, where an operator runs ``raftflow migrate`` first), a newer one is refused.
    """

    def __init__(
        self,
        *,
        transport: SqlTransport | None = None,
        store: SqlStore | None = None,
        url: str | Sequence[str] | None = None,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        auto_migrate: bool | None = None,
        max_history: int = DEFAULT_MAX_HISTORY,
        retention: timedelta | None = DEFAULT_RETENTION,
        version: str | None = None,
        **options: Unpack[ConnectOptions],
    ) -> None:
        _check_positive_int(max_payload_bytes, "max_payload_bytes")
        _check_positive_int(max_history, "max_history")
        check_connect_options(options)
        #: Its workflows and steps, and the version its executions are pinned to:
        #: ``version``, or a hash of its workflows' source (engine/workflow/versions.py).
        self.registry = Registry(version)
        self.max_payload_bytes = max_payload_bytes
        #: Calls one run of a workflow may record (warned at 80%): see continue_as_new.
        self.max_history = max_history
        #: Finished executions older than this are deleted by the workers (None: never).
        self.retention = check_retention(retention)
        self.hooks: list[Hooks] = []
        self.schedules: dict[str, Schedule] = {}
        self.local = LocalWorkers()
        self.auto_migrate = auto_migrate
        self._url, self._options = url, options
        self._lock = threading.Lock()
        self._shards: Shards | None = None
        if (transport is None) != (store is None):
            raise ConfigurationError("give both a transport and a store, or neither")
        if transport is not None and store is not None:
            if url is not None or options:
                raise ConfigurationError(
                    "a URL and connection options are for the engine's own transport and "
                    "store: give them to their from_url() instead"
                )
            store.share(transport)
            self._shards = Shards([Shard("", transport, store)], None)

    @classmethod
    def from_url(
        cls,
        url: str | Sequence[str] = DEFAULT_URL,
        *,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        auto_migrate: bool | None = None,
        max_history: int = DEFAULT_MAX_HISTORY,
        retention: timedelta | None = DEFAULT_RETENTION,
        version: str | None = None,
        **options: Unpack[ConnectOptions],
    ) -> Engine:
        """An engine connected now to ``url``: its transport and store on that database
        (``options``: :class:`~raftflow.transports.db.database.ConnectOptions`)."""
        engine = cls(
            url=url,
            max_payload_bytes=max_payload_bytes,
            auto_migrate=auto_migrate,
            max_history=max_history,
            retention=retention,
            version=version,
            **options,
        )
        engine.shards  # noqa: B018 -- connect now
        return engine

    # -- the transport and the store ------------------------------------------------------

    def connect(self, url: str | Sequence[str], **options: Unpack[ConnectOptions]) -> None:
        """Point this engine at ``url`` (closing the transports and stores it had opened)."""
        check_connect_options(options)
        shards = open_shards(url, self.max_payload_bytes, self.auto_migrate, options)
        with self._lock:
            old, self._shards = self._shards, shards
            self._url, self._options = url, options
        if old is not None:
            old.close()

    @property
    def shards(self) -> Shards:
        """The clusters this engine reaches: one, or those of a sharded deployment (a URL
        with ``;``), each a transport and a store (opened on first use)."""
        with self._lock:
            if self._shards is None:
                url = self._url if self._url is not None else DEFAULT_URL
                self._shards = open_shards(
                    url, self.max_payload_bytes, self.auto_migrate, self._options
                )
            return self._shards

    def _connected(self) -> Shard:
        shards = self.shards
        if shards.sharded:
            raise ConfigurationError(
                "this engine is sharded: each cluster has its own transport and store "
                "(engine.shards.of(execution_id))"
            )
        return shards.shards[0]

    @property
    def transport(self) -> SqlTransport:
        """The queue that delivers the executions' events (opened on first use; a sharded
        engine has one per cluster: :attr:`shards`)."""
        return self._connected().transport

    @property
    def store(self) -> SqlStore:
        """The executions' state: records, status, outcomes (opened on first use; a sharded
        engine has one per cluster: :attr:`shards`)."""
        return self._connected().store

    @property
    def version(self) -> str:
        """The version of this code: executions it starts are run only by workers of the
        same version (or adopting ones). ``Engine(version=...)``, else a hash of the source
        of its registered workflows."""
        return self.registry.version

    def close(self) -> None:
        """Close the transports' connections (which the stores share)."""
        with self._lock:
            shards, self._shards = self._shards, None
        if shards is not None:
            shards.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def add_hooks(self, hooks: Hooks) -> None:
        """Register worker lifecycle hooks: metrics, tracing (:class:`Hooks`)."""
        if not isinstance(hooks, Hooks):
            raise ConfigurationError("hooks must subclass raftflow.Hooks")
        self.hooks.append(hooks)

    def create_tables(self, metadata: Any) -> None:
        """Create the tables (and indexes) of a SQLAlchemy ``MetaData`` in the engine's
        database, ``IF NOT EXISTS``, in one request (one transaction): the application's
        tables that transaction steps write live beside raftflow's own."""
        from raftflow.engine.workflow.transaction import create_tables_request
        from raftflow.transports.db.flow import single

        request = create_tables_request(metadata)
        for shard in self.shards:  # sharded: the app's tables on every cluster
            shard.store.run(single(request))

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
        lapse and other workers take over within ``visibility`` seconds (the lease length).
        ``queues=[...]``: serve only these named queues (every option: :class:`WorkerOptions`).
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


def _check_positive_int(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive int")
