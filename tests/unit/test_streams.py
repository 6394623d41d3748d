"""Durable streams on the embedded backend (SQLite: the same SQL as on rqlite;
tests/integration/test_streams_cluster.py reads them through worker kills and a leader
kill on a 3-node cluster): order, exactly once on replay, close, the size limit, bad
values refused at the boundary, retention."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine.ops.cli import main
from raftflow.engine.ops.cli.exits import Exit
from raftflow.engine.runtime.retention import RetentionFlows
from raftflow.engine.testing import WorkflowTestEnvironment
from raftflow.stores import streams as stream_rows

from raftflow import (
    Client,
    Engine,
    ExecutionNotFoundError,
    InvalidArgumentError,
    NotInWorkflowError,
    Status,
)
from raftflow.errors import PayloadTooLargeError, StreamClosedError, StreamFullError


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'streams.db'}"


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    engine = Engine.from_url(url)
    yield engine
    engine.close()


def stream_calls(engine: Engine, execution_id: str) -> list[str]:
    return [s.status for s in engine.store.steps(execution_id) if s.kind == "stream"]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_reader_attached_before_the_writes_sees_each_value_once_in_order(
    engine: Engine, url: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream_rows, "PAGE_SIZE", 7)  # 30 values: several pages a reader
    go = threading.Event()

    if kind == "sync":

        @engine.step
        def wait_for_reader() -> None:
            assert go.wait(10)

        @engine.workflow
        def produce(n: int) -> int:
            wait_for_reader()
            for i in range(n):
                engine.write_stream("tokens", {"i": i})
            engine.write_stream("other", "x")
            engine.close_stream("tokens")
            engine.close_stream("tokens")  # closing a closed stream does nothing
            return n

    else:

        @engine.step
        async def await_reader() -> None:
            assert await asyncio.to_thread(go.wait, 10)

        @engine.workflow
        async def produce(n: int) -> int:
            await await_reader()
            for i in range(n):
                await engine.write_stream_async("tokens", {"i": i})
            await engine.write_stream_async("other", "x")
            await engine.close_stream_async("tokens")
            return n

    with engine.running_worker():
        handle = engine.start(produce, 30)
        seen: list[Any] = []
        reader = threading.Thread(
            target=lambda: seen.extend(engine.read_stream(handle.id, "tokens"))
        )
        reader.start()
        go.set()
        reader.join(10)
        assert not reader.is_alive()
        assert seen == [{"i": i} for i in range(30)]
        assert handle.result(timeout=10) == 30
    # After the fact, from an offset, and the other key; not following: what is there.
    assert list(engine.read_stream(handle.id, "tokens", offset=28)) == [{"i": 28}, {"i": 29}]
    assert list(engine.read_stream(handle.id, "other", follow=False)) == ["x"]
    assert list(engine.read_stream(handle.id, "none", follow=False)) == []
    # A stream never closed ends for a follower once the execution is finished.
    assert list(engine.read_stream(handle.id, "other")) == ["x"]
    infos = {info.key: (info.length, info.closed) for info in engine.streams(handle.id)}
    assert infos == {"other": (1, False), "tokens": (30, True)}

    async def read_async() -> tuple[list[Any], list[Any]]:
        ours = [value async for value in engine.read_stream_async(handle.id, "tokens", 25)]
        async with Client.from_url(url).to_async() as client:  # by name, from elsewhere
            theirs = [value async for value in client.read_stream(handle.id, "tokens", 28)]
            assert [s.key for s in await client.streams(handle.id)] == ["other", "tokens"]
        return ours, theirs

    assert asyncio.run(read_async()) == ([{"i": i} for i in range(25, 30)], [{"i": 28}, {"i": 29}])


def test_a_replayed_write_is_not_appended_again_across_a_worker_restart(
    engine: Engine,
) -> None:
    runs: list[int] = []

    @engine.workflow
    def produce() -> str:
        runs.append(1)
        engine.write_stream("log", "a")
        engine.write_stream("log", "b")
        engine.recv("one", timeout=30)  # parks; no continuation kept: replayed when woken
        engine.write_stream("log", "c")
        engine.recv("two", timeout=30)  # the first worker stops here; the second replays
        engine.write_stream("log", "d")
        return "done"

    def values_become(expected: list[str]) -> None:
        deadline = time.monotonic() + 10
        while list(engine.read_stream(handle.id, "log", follow=False)) != expected:
            assert time.monotonic() < deadline, f"the stream never became {expected}"
            time.sleep(0.02)

    with engine.running_worker(sticky_cache=0):
        handle = engine.start(produce)
        values_become(["a", "b"])
        engine.send(handle.id, "go", topic="one")
        values_become(["a", "b", "c"])
    assert handle.status() is Status.RUNNING
    with engine.running_worker():
        engine.send(handle.id, "go", topic="two")
        assert handle.result(timeout=10) == "done"
    assert len(runs) == 3  # replayed past its writes twice
    assert list(engine.read_stream(handle.id, "log")) == ["a", "b", "c", "d"]
    assert stream_calls(engine, handle.id) == ["succeeded"] * 4


def test_writes_after_a_close_or_past_the_limit_raise_in_the_workflow_every_replay(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream_rows, "MAX_STREAM_VALUES", 3)

    @engine.workflow
    def overflow() -> list[str]:
        caught = []
        for i in range(4):
            try:
                engine.write_stream("full", i)
            except StreamFullError as exc:
                caught.append(f"full: {exc}")
        engine.close_stream("shut")
        try:
            engine.write_stream("shut", "late")
        except StreamClosedError as exc:
            caught.append(f"closed: {exc}")
        engine.recv("again", timeout=30)  # replayed when woken: the refusals raise again
        runs.append(list(caught))
        return caught

    runs: list[list[str]] = []
    with engine.running_worker(sticky_cache=0):
        handle = engine.start(overflow)
        time.sleep(0.3)
        engine.send(handle.id, None, topic="again")
        caught = handle.result(timeout=10)
    assert len(runs) == 1 and runs[0] == caught and len(caught) == 2
    assert caught[0].startswith("full: ") and "holds 3 values" in caught[0]
    assert caught[1].startswith("closed: ") and "is closed" in caught[1]
    assert list(engine.read_stream(handle.id, "full")) == [0, 1, 2]
    assert list(engine.read_stream(handle.id, "shut")) == []
    assert stream_calls(engine, handle.id) == ["succeeded"] * 3 + ["failed"] * 1 + [
        "succeeded",
        "failed",
    ]


def test_bad_values_and_arguments_are_refused_at_the_boundary(engine: Engine) -> None:
    big = "x" * (engine.max_payload_bytes + 1)

    @engine.workflow
    def bad() -> list[str]:
        refused = []
        for value in (math.nan, math.inf, object(), big):
            try:
                engine.write_stream("s", value)
            except InvalidArgumentError as exc:
                refused.append(type(exc).__name__)
        for key in ("a\x00b", 5):
            try:
                engine.write_stream(key, 1)  # type: ignore[arg-type]
            except InvalidArgumentError as exc:
                refused.append(type(exc).__name__)
        try:
            list(engine.read_stream("elsewhere", "s"))
        except NotInWorkflowError:
            refused.append("read in a workflow")
        return refused

    with engine.running_worker():
        handle = engine.start(bad)
        refused = handle.result(timeout=10)
    assert refused == ["InvalidArgumentError"] * 3 + [PayloadTooLargeError.__name__] + [
        "InvalidArgumentError"
    ] * 2 + ["read in a workflow"]
    assert stream_calls(engine, handle.id) == []  # nothing recorded, nothing written
    assert list(engine.read_stream(handle.id, "s")) == []
    with pytest.raises(NotInWorkflowError):
        engine.write_stream("s", 1)
    with pytest.raises(InvalidArgumentError, match="offset"):
        engine.read_stream(handle.id, "s", offset=-1)
    with pytest.raises(ExecutionNotFoundError):
        list(engine.read_stream("no-such-execution", "s"))


def test_retention_deletes_streams_with_their_execution() -> None:
    engine = Engine(retention=timedelta(days=1))

    @engine.workflow
    def produce(n: int) -> int:
        for i in range(n):
            engine.write_stream("s", i)
        return n

    assert engine.retention is not None
    keep = engine.retention.total_seconds()
    with WorkflowTestEnvironment(engine) as env:
        retention = RetentionFlows(env.clock)
        old = engine.start(produce, 3)
        assert env.result(old, within=60) == 3
        env.advance(2 * 86_400)
        young = engine.start(produce, 2)
        assert env.result(young, within=60) == 2
        assert engine.store.run(retention.delete_batch(keep, 50)) == 1
        assert engine.streams(young.id)[0].length == 2
        assert engine.store.run(stream_rows.keys(old.id)) == []  # the rows are gone


def test_the_stream_command_prints_one_json_value_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    engine = Engine.from_url(url)

    @engine.workflow
    def produce(n: int) -> int:
        for i in range(n):
            engine.write_stream("s", {"i": i, "text": "é"})
        engine.close_stream("s")
        return n

    try:
        with engine.running_worker():
            assert engine.start(produce, 3, execution_id="e1").result(timeout=10) == 3
    finally:
        engine.close()
    capsys.readouterr()
    assert main(["stream", "e1", "s", "--url", url]) == Exit.OK
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [{"i": i, "text": "é"} for i in range(3)]
    assert main(["stream", "e1", "s", "--follow", "--offset", "2", "--url", url]) == Exit.OK
    assert capsys.readouterr().out == '{"i":2,"text":"é"}\n'
    assert main(["stream", "nope", "s", "--url", url]) != Exit.OK
    assert "no execution has id 'nope'" in capsys.readouterr().err
