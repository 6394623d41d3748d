"""AsyncClient: the async twin of :class:`~raftflow.Client`, and its handles.

Each call awaits the client's own in a worker thread (as the engine's ``*_async`` calls
do): one implementation of every call, the event loop never blocked by a request.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
from collections.abc import AsyncIterator, Sequence
from typing import Any, Generic, TypeVar

from raftflow.engine.app import DEFAULT_URL
from raftflow.engine.client.client import Client
from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.workflow.queues import DEFAULT_QUEUE
from raftflow.stores.records import ExecutionRecord, Status, StepRecord
from raftflow.stores.streams import StreamInfo
from raftflow.transports.db.database import ConnectOptions
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from typing_extensions import Unpack

T = TypeVar("T")


class AsyncWorkflowHandle(Generic[T]):
    """A :class:`~raftflow.WorkflowHandle` whose calls are awaited."""

    def __init__(self, handle: WorkflowHandle[T]) -> None:
        self.handle = handle
        self.id = handle.id
        #: False when the start found the execution already there.
        self.created = handle.created

    async def info(self) -> ExecutionRecord:
        """The execution as stored now."""
        return await asyncio.to_thread(self.handle.info)

    async def status(self) -> Status:
        """pending, running, succeeded, failed or cancelled."""
        return await asyncio.to_thread(self.handle.status)

    async def steps(self) -> builtins.list[StepRecord]:
        """The recorded steps, in call order."""
        return await asyncio.to_thread(self.handle.steps)

    async def result(self, timeout: float | None = None, *, poll_interval: float = 0.05) -> T:
        """The output once the execution finishes (see :meth:`WorkflowHandle.result`)."""
        return await self.handle.result_async(timeout, poll_interval=poll_interval)

    async def cancel(self) -> Status:
        """Cancel the execution; its status when asked."""
        return await asyncio.to_thread(self.handle.cancel)

    def __repr__(self) -> str:
        return f"<AsyncWorkflowHandle {self.id}>"


class AsyncClient:
    """The async twin of :class:`~raftflow.Client`: the same calls, awaited.
    ``await AsyncClient.from_url(url)``, or ``client.to_async()``."""

    def __init__(self, client: Client) -> None:
        self.client = client

    @classmethod
    async def from_url(
        cls,
        url: str | Sequence[str] = DEFAULT_URL,
        *,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        **options: Unpack[ConnectOptions],
    ) -> AsyncClient:
        """A client connected now to ``url`` (see :meth:`Client.from_url`)."""
        connect = functools.partial(
            Client.from_url, url, max_payload_bytes=max_payload_bytes, **options
        )
        return cls(await asyncio.to_thread(connect))

    async def start(
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
    ) -> AsyncWorkflowHandle[Any]:
        """Start an execution of the workflow named ``workflow`` (see :meth:`Client.start`)."""
        start = functools.partial(
            self.client.start,
            workflow,
            input,
            execution_id=execution_id,
            priority=priority,
            queue=queue,
            debounce=debounce,
            concurrency_key=concurrency_key,
            output_type=output_type,
        )
        return AsyncWorkflowHandle(await asyncio.to_thread(start))

    async def get(self, execution_id: str, *, output_type: Any = None) -> AsyncWorkflowHandle[Any]:
        """The handle of an existing execution (see :meth:`Client.get`)."""
        get = functools.partial(self.client.get, execution_id, output_type=output_type)
        return AsyncWorkflowHandle(await asyncio.to_thread(get))

    async def list(
        self, status: Status | str | None = None, limit: int = 100
    ) -> builtins.list[ExecutionRecord]:
        """The most recent executions first, optionally only those with ``status``."""
        return await asyncio.to_thread(self.client.list, status, limit)

    async def get_event(self, execution_id: str, key: str, timeout: float = 0.0) -> Any:
        """The latest value of an execution's event ``key`` (see :meth:`Client.get_event`)."""
        return await asyncio.to_thread(self.client.get_event, execution_id, key, timeout)

    async def read_stream(
        self, execution_id: str, key: str, offset: int = 0, follow: bool = True
    ) -> AsyncIterator[Any]:
        """The values of an execution's stream ``key``, as an async iterator (see
        :meth:`Client.read_stream`)."""
        async for value in self.client._read_stream_async(execution_id, key, offset, follow):
            yield value

    async def streams(self, execution_id: str) -> builtins.list[StreamInfo]:
        """The streams of an execution (see :meth:`Client.streams`)."""
        return await asyncio.to_thread(self.client.streams, execution_id)

    async def send(
        self, execution_id: str, message: Any, topic: str | None = None, key: str | None = None
    ) -> None:
        """Send ``message`` to an execution (see :meth:`Client.send`)."""
        await asyncio.to_thread(self.client.send, execution_id, message, topic, key)

    async def cancel(self, execution_id: str) -> Status:
        """Cancel an execution (see :meth:`Client.cancel`)."""
        return await asyncio.to_thread(self.client.cancel, execution_id)

    async def resume(self, execution_id: str, *, to_current_version: bool = False) -> bool:
        """Run a failed or cancelled execution again (see :meth:`Client.resume`)."""
        resume = functools.partial(
            self.client.resume, execution_id, to_current_version=to_current_version
        )
        return await asyncio.to_thread(resume)

    async def fork(
        self,
        execution_id: str,
        from_step: int,
        *,
        new_execution_id: str | None = None,
        to_current_version: bool = False,
    ) -> AsyncWorkflowHandle[Any]:
        """A new execution from ``execution_id``'s call ``from_step`` (see :meth:`Client.fork`)."""
        fork = functools.partial(
            self.client.fork,
            execution_id,
            from_step,
            new_execution_id=new_execution_id,
            to_current_version=to_current_version,
        )
        return AsyncWorkflowHandle(await asyncio.to_thread(fork))

    async def close(self) -> None:
        """Close the connection (the sync client's too: they share it)."""
        await asyncio.to_thread(self.client.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncClient {';'.join(shard.identity for shard in self.client.shards)}>"
