"""Durable streams, the reading side: ``read_stream``, on the client face (the
:class:`~raftflow.Engine` and the :class:`~raftflow.Client` share it).

A reader asks for a page of values from its position on, with the execution's status
(:func:`raftflow.stores.streams.read`, a weak read: no Raft entry), yields them, and --
following -- polls again, backing off while nothing comes (up to :data:`MAX_POLL`), until
the stream is closed or the execution is finished. The sync iterator and the async one
share :class:`StreamCursor`, which decides everything but how to wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from raftflow.engine.workflow.context import current_activation
from raftflow.stores import streams
from raftflow.stores.streams import StreamInfo, StreamPage
from raftflow.transports.db.flow import Flow
from raftflow.transports.payload import check_id

from raftflow.errors import NotInWorkflowError

if TYPE_CHECKING:
    from raftflow.stores.store import SqlStore

#: The first wait of a follower that found nothing new, doubled up to :data:`MAX_POLL`.
FIRST_POLL = 0.02
MAX_POLL = 0.5


class StreamCursor:
    """Where a reader is in a stream, what to read next and how long to wait before."""

    def __init__(self, execution_id: str, key: str, offset: int, follow: bool) -> None:
        self.execution_id, self.key, self.follow = execution_id, key, follow
        self.position = offset
        self.done = False
        self.delay = 0.0  # the first read at once
        self.final = False  # the execution was finished: one strong read, then the end

    def next_read(self) -> Flow[StreamPage]:
        return streams.read(self.execution_id, self.key, self.position, strong=self.final)

    def take(self, page: StreamPage) -> tuple[Any, ...]:
        """The page's values, and what comes next: the end, another page at once, or a wait
        (:attr:`delay`)."""
        self.position = page.next_position
        full = len(page.values) + page.closed >= streams.PAGE_SIZE
        if page.closed or (self.final and not full):
            self.done = True
        elif page.status.is_final and not full:
            # Everything it wrote is committed: read once more at strong (a weak page may
            # be a stale leader's), then stop.
            self.final, self.delay = True, 0.0
        elif not self.follow and not full:
            self.done = True
        elif full:  # more is there: read it at once
            self.delay = 0.0
        elif page.values:
            self.delay = FIRST_POLL
        else:
            self.delay = min(max(self.delay * 2, FIRST_POLL), MAX_POLL)
        return page.values


class StreamReads:
    """read_stream (and what its async twins share), and the list of an execution's
    streams."""

    def store_of(self, execution_id: str) -> SqlStore:
        raise NotImplementedError  # the client face's: the cluster that holds it

    def read_stream(
        self, execution_id: str, key: str, offset: int = 0, follow: bool = True
    ) -> Iterator[Any]:
        """The values of execution ``execution_id``'s stream ``key`` (``write_stream``),
        from position ``offset`` (0: the first) on, each once and in order. Following, it
        waits for new values until the stream is closed or the execution is finished;
        otherwise it ends with the values written so far.
        :class:`~raftflow.errors.ExecutionNotFoundError` if there is no such execution."""
        return _follow(self.store_of(execution_id), self._cursor(execution_id, key, offset, follow))

    def _read_stream_async(
        self, execution_id: str, key: str, offset: int, follow: bool
    ) -> AsyncIterator[Any]:
        """The async twin of :meth:`read_stream` (the engine's ``read_stream_async``,
        the async client's ``read_stream``): its requests run in a worker thread, its
        waits on the loop."""
        return _afollow(
            self.store_of(execution_id), self._cursor(execution_id, key, offset, follow)
        )

    def streams(self, execution_id: str) -> list[StreamInfo]:
        """The streams of an execution: each key, its number of values, whether closed."""
        check_id(execution_id, what="execution_id")
        return self.store_of(execution_id).run(streams.keys(execution_id))

    def _cursor(self, execution_id: str, key: str, offset: int, follow: bool) -> StreamCursor:
        if current_activation() is not None:
            raise NotInWorkflowError(
                "read_stream() is for client code (its values would not be recorded)"
            )
        return StreamCursor(*streams.check_read(execution_id, key, offset), bool(follow))


def _follow(store: SqlStore, cursor: StreamCursor) -> Iterator[Any]:
    while not cursor.done:
        if cursor.delay:
            time.sleep(cursor.delay)
        yield from cursor.take(store.run(cursor.next_read()))


async def _afollow(store: SqlStore, cursor: StreamCursor) -> AsyncIterator[Any]:
    while not cursor.done:
        if cursor.delay:
            await asyncio.sleep(cursor.delay)
        for value in cursor.take(await asyncio.to_thread(store.run, cursor.next_read())):
            yield value
