"""Test helpers shared by the suites: a sync view of async objects, table clearing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import httpx
from raftflow.transports.db.database import Database
from raftflow.transports.db.flow import Flow, Request, Response, Statement

TABLES = (
    "messages",
    "groups",
    "message_keys",
    "executions",
    "steps",
    "signals",
    "events",
    "workers",
    "worker_duties",
    "rate_slots",
    "streams",
)


def rows(database: Database, sql: str, *params: object) -> list[dict[str, Any]]:
    """The rows of one read (strong: right after a restart a weak one can be stale)."""

    def flow() -> Flow[list[dict[str, Any]]]:
        response = yield Request((Statement("test.read", sql, params),), level="strong")
        return response.raise_for_errors()[0].dicts()

    return database.run(flow())


def execute(database: Database, *statements: Statement, transaction: bool = True) -> None:
    """Send ``statements`` as one request; raise on any error."""

    def flow() -> Flow[None]:
        (yield Request(statements, transaction=transaction)).raise_for_errors()

    database.run(flow())


def recorded(flow: Flow[Any], sent: list[Request]) -> Flow[Any]:
    """``flow``, noting every request it sends in ``sent``."""
    response: Response | None = None
    while True:
        try:
            request = flow.send(response)  # type: ignore[arg-type]
        except StopIteration as stop:
            return stop.value
        sent.append(request)
        response = yield request


class LoopThread:
    """An event loop in a background thread, to drive async twins from sync test bodies."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Any, timeout: float | None = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class SyncView:
    """Calls an async twin's coroutine methods as if they were sync: one test body, two
    twins. Attributes that are not coroutine functions pass through."""

    def __init__(self, target: Any, loop: LoopThread) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if not asyncio.iscoroutinefunction(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run(attribute(*args, **kwargs))

        return call

    def __repr__(self) -> str:
        return f"SyncView({self._target!r})"


def clear_tables(url: str, auth: tuple[str, str] | None = None, **kwargs: Any) -> None:
    """Empty raftflow's tables on an rqlite cluster (they may not exist yet)."""
    statements = [[f"DELETE FROM {table}"] for table in TABLES]
    response = httpx.post(f"{url}/db/execute", json=statements, auth=auth, timeout=30, **kwargs)
    response.raise_for_status()
    for result in response.json()["results"]:
        error = result.get("error")
        if error and "no such table" not in error:
            raise RuntimeError(f"clearing tables failed: {error}")


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
