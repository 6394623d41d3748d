"""Client: start workflows by name and follow them, from a process without their code.

A web app that starts an order workflow need not import the workers' code (nor its
dependencies): ``Client.from_url(url).start("checkout", {"id": "o1"})``. Everything but
the start is the client face the :class:`~raftflow.Engine` has too (engine/client/face.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

from raftflow.engine.app import DEFAULT_URL
from raftflow.engine.client.face import ClientFace, check_debounce, start_arguments
from raftflow.engine.client.routing import execution_route, route
from raftflow.engine.runtime.hooks import Hooks
from raftflow.engine.runtime.local import LocalWorkers
from raftflow.engine.shards.deployment import Shard, Shards, open_shards
from raftflow.engine.workflow.context import current_activation
from raftflow.engine.workflow.queues import DEFAULT_QUEUE, check_queue
from raftflow.engine.workflow.registry import Codec
from raftflow.engine.workflow.starts import DEFAULTS
from raftflow.stores.store import SqlStore
from raftflow.transports.db.database import ConnectOptions, check_connect_options
from raftflow.transports.payload import MAX_PAYLOAD_BYTES, check_id, to_json
from raftflow.transports.transport import SqlTransport
from typing_extensions import Unpack

from raftflow.errors import ConfigurationError, InvalidArgumentError, NotInWorkflowError

if TYPE_CHECKING:
    from raftflow.engine.client.async_client import AsyncClient
    from raftflow.engine.client.handle import WorkflowHandle

T = TypeVar("T")


class Client(ClientFace):
    """Starts workflows by name, follows and steers executions: no workflow code needed.

    ``Client.from_url("http://host:4001")`` (rqlite) or ``Client.from_url("sqlite:///app.db")``;
    :meth:`to_async` gives its async twin (an
    :class:`~raftflow.engine.client.async_client.AsyncClient`). Inputs and outputs are JSON
    values (a pydantic model instance as input is stored as its JSON; ``output_type=``
    turns an output back into a model, a ``list[int]``...).

    A start by name applies the workflow's start settings as the app's engine would (its
    decorator's ``timeout`` and concurrency limit, its queue's limit): the running workers
    publish them (engine/workflow/starts.py). It validates no input: the worker's code
    does, when it runs (a bad one fails the execution).
    """

    def __init__(self, transport: SqlTransport, store: SqlStore) -> None:
        store.share(transport)
        self._open(Shards([Shard("", transport, store)], None))

    def _open(self, shards: Shards) -> None:
        self._shards = shards
        self.hooks: list[Hooks] = []
        self.local = LocalWorkers()  # runs no worker: every start is written, every wait polls
        self.max_payload_bytes = shards.shards[0].store.max_payload_bytes

    @classmethod
    def from_url(
        cls,
        url: str | Sequence[str] = DEFAULT_URL,
        *,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        **options: Unpack[ConnectOptions],
    ) -> Client:
        """A client connected now to ``url`` (``options``:
        :class:`~raftflow.transports.db.database.ConnectOptions`). The schema is checked as
        an engine's is: a SQLite file is created or migrated, an older rqlite schema refused
        (``raftflow migrate``)."""
        check_connect_options(options)
        client = cls.__new__(cls)
        client._open(open_shards(url, max_payload_bytes, None, options))
        return client

    @property
    def shards(self) -> Shards:
        """The clusters it reaches: one, or those of a sharded deployment."""
        return self._shards

    @property
    def store(self) -> SqlStore:
        """The executions' state: records, status, outcomes (unsharded; a sharded
        deployment has a store per cluster: :meth:`store_of`)."""
        return self._single().store

    @property
    def transport(self) -> SqlTransport:
        """The queue (unsharded; a sharded deployment has one per cluster: :attr:`shards`)."""
        return self._single().transport

    def _single(self) -> Shard:
        if self._shards.sharded:
            raise ConfigurationError(
                "this client is sharded: each cluster has its own transport and store "
                "(client.shards.of(execution_id))"
            )
        return self._shards.shards[0]

    @overload
    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
        debounce: float | None = None,
        concurrency_key: str | None = None,
        output_type: None = None,
    ) -> WorkflowHandle[Any]: ...

    @overload
    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
        debounce: float | None = None,
        concurrency_key: str | None = None,
        output_type: type[T],
    ) -> WorkflowHandle[T]: ...

    def start(
        self,
        workflow: str,
        input: Any = None,
        *,
        execution_id: str | None = None,
        priority: int = 0,
        queue: str = DEFAULT_QUEUE,
        debounce: float | None = None,
        concurrency_key: str | None = None,
        output_type: Any = None,
    ) -> WorkflowHandle[Any]:
        """Start an execution of the workflow named ``workflow`` in ``queue`` with
        ``input`` (a JSON value or a pydantic model); ``execution_id``, ``priority`` and
        ``debounce`` as ``engine.start``'s. ``output_type``: what ``handle.result()``
        turns the output into (default: the JSON value).

        It is pinned to the version of the code the running workers serving ``queue``
        run (the version most of them run; a tie goes to the most recently started
        worker's), and gets the start settings those workers publish for it: the
        workflow's ``timeout``, its concurrency limit or its queue's. One read of the
        workers' lanes and settings, then the start's one request. A workflow limited per
        ``concurrency_key`` (a function of its input, which only its code can compute)
        needs the key of this start: ``concurrency_key="..."``, what the function returns
        for ``input``.

        :class:`UnknownWorkflowError` (nothing written) when running workers report what
        they serve and none serves ``workflow`` in ``queue``. When none reports (none is
        running, or only workers of a release before lanes), the execution waits in the
        unrouted lane, visibly (``raftflow queue``), for any worker that registers it, and
        no start setting is applied (nothing tells them).
        """
        if current_activation() is not None:
            raise NotInWorkflowError(
                "a Client starts from client code; a workflow starts a child with engine.start()"
            )
        name = check_id(workflow, what="workflow name")
        queue = check_queue(queue)
        if debounce is not None:
            debounce = check_debounce(debounce, execution_id, None)
        if concurrency_key is not None:
            check_id(concurrency_key, what="concurrency_key")
        drawn = execution_id is None
        execution_id = start_arguments(execution_id, priority)
        to_json(input, what="workflow input", limit=self.max_payload_bytes)
        output = None if output_type is None else Codec.of(output_type)
        store = self.store_of(execution_id)
        routed = store.run(route(store.clock, queue, name))
        settings = routed.settings or DEFAULTS
        if concurrency_key is not None and routed.settings is not None and not settings.keyed:
            raise InvalidArgumentError(
                f"workflow {name!r} has no concurrency_key: give none; nothing was started"
            )
        key = None if concurrency_key is None else lambda: concurrency_key
        limit = settings.limit(name, queue, key)
        if debounce is not None and limit is not None:
            check_debounce(debounce, execution_id, limit)
        return self._record_start(
            name,
            input,
            execution_id,
            priority,
            lane=routed.lane,
            limit=limit,
            timeout=settings.timeout,
            debounce=debounce,
            output=output,
            drawn=drawn,
        )

    def _current_lane(self, execution_id: str) -> str:
        store = self.store_of(execution_id)
        return store.run(execution_route(store.clock, execution_id))

    def to_async(self) -> AsyncClient:
        """The async twin on this client's connection (closing either closes both)."""
        from raftflow.engine.client.async_client import AsyncClient

        return AsyncClient(self)

    def close(self) -> None:
        """Close the connections."""
        self._shards.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Client {';'.join(shard.identity for shard in self._shards)}>"
