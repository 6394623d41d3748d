"""Durable streams in the database: the writes a workflow's commit carries, and the reads.

A stream is the values a workflow appends to a key of its execution (migration 13). Its
writes are not requests of their own: each is a :class:`~raftflow.stores.commit.Write`
of the commit that records the call (:mod:`raftflow.engine.workflow.streams`), applied in
that commit's transaction or not at all. Reading is a page at a time from a position on,
with the execution's status in the same answer, so a reader knows when to stop
(:mod:`raftflow.engine.client.streams` follows a stream with these pages).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raftflow.stores.commit import Write
from raftflow.stores.records import Status
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.flow import Flow, Request
from raftflow.transports.payload import check_id, check_topic, from_json

from raftflow.errors import ExecutionNotFoundError, InvalidArgumentError

SQL = load("raftflow.stores", "streams.sql", "streams")

#: The most values one stream holds; a write past it raises
#: :class:`~raftflow.errors.StreamFullError` in the workflow (nothing is written).
MAX_STREAM_VALUES = 100_000
#: Values per read: a reader far behind catches up a page per request.
PAGE_SIZE = 500


@dataclass(frozen=True, slots=True)
class StreamPage:
    """Values of a stream from ``position`` on, as one read found them."""

    position: int
    values: tuple[Any, ...]
    closed: bool  # the page ends with the stream's close
    status: Status  # the execution's, read just before the page

    @property
    def next_position(self) -> int:
        return self.position + len(self.values)


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """One stream of an execution: its key, how many values it holds, whether it is closed."""

    key: str
    length: int
    closed: bool


def write(
    execution_id: str, key: str, value: str | None, *, run: int, call_idx: int, now: float
) -> Write:
    """The write of a value (JSON text) at the stream's next position, or of its close
    (``value`` None). A value must write its row: a closed or full stream refuses it (the
    commit aborts); a close of a closed stream writes nothing."""
    params: dict[str, Any] = {
        "execution_id": execution_id,
        "key": key,
        "run": run,
        "call_idx": call_idx,
        "now": now,
    }
    if value is None:
        return Write(SQL("close", params), expect_rows=None)
    params.update(value=value, max_values=MAX_STREAM_VALUES)
    return Write(SQL("write", params), expect_rows=1)


def write_live(
    execution_id: str, key: str, value: str, *, lease_token: str, now: float
) -> Flow[bool]:
    """Append ``value`` (JSON text) to a stream from a running step, not from a recorded
    call: one request, written only while ``lease_token`` holds the execution (False when
    it did not, or the stream is closed or full: nothing written). Not exactly once: a
    step run again writes its values again."""
    params = {
        "execution_id": execution_id,
        "key": key,
        "value": value,
        "now": now,
        "lease_token": lease_token,
        "max_values": MAX_STREAM_VALUES,
    }
    response = yield Request((SQL("write_live", params),))
    return response.raise_for_errors()[0].rows_affected == 1


def state(execution_id: str, key: str) -> Flow[tuple[bool, int]]:
    """(closed, length) of a stream, read at ``strong`` (why a write was refused)."""
    params = {"execution_id": execution_id, "key": key}
    response = yield Request((SQL("state", params),), level="strong")
    row = response.raise_for_errors()[0].first() or {}
    return bool(row.get("closed")), int(row.get("length") or 0)


def read(execution_id: str, key: str, position: int, *, strong: bool = False) -> Flow[StreamPage]:
    """Up to :data:`PAGE_SIZE` values from ``position`` on (a weak read unless ``strong``:
    a stale page is merely shorter). :class:`ExecutionNotFoundError` when no execution has
    the id (believed only at ``strong``)."""
    params = {"execution_id": execution_id, "key": key, "position": position, "limit": PAGE_SIZE}
    # The status first: when it is final, the page read after it holds every value.
    response = yield Request(
        (SQL("status", params), SQL("read", params)), level="strong" if strong else "weak"
    )
    status, page = response.raise_for_errors()[0].first(), response[1].dicts()
    if status is None:
        if not strong:
            return (yield from read(execution_id, key, position, strong=True))
        raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
    closed = bool(page) and bool(page[-1]["closed"])
    values = tuple(from_json(row["value"]) for row in page if not row["closed"])
    return StreamPage(position, values, closed, Status(status["status"]))


def keys(execution_id: str) -> Flow[list[StreamInfo]]:
    """The streams of an execution, by key (a weak read)."""
    response = yield Request((SQL("keys", {"execution_id": execution_id}),), level="weak")
    return [
        StreamInfo(str(row["key"]), int(row["length"] or 0), bool(row["closed"]))
        for row in response.raise_for_errors()[0].dicts()
    ]


def check_read(execution_id: str, key: str, offset: int) -> tuple[str, str, int]:
    """A read's arguments, checked at the public boundary."""
    check_id(execution_id, what="execution_id")
    key = check_topic(key, what="stream key")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgumentError(f"offset must be an int >= 0, not {offset!r}")
    return execution_id, key, offset
