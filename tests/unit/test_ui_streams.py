"""The dashboard's live streams (engine/ops/ui/streams.py) on its ASGI app over an
embedded SQLite engine: the server-sent events of a stream followed while it is
written, resumed after a Last-Event-ID, and the same Host allow-list as every page."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.engine import Engine
from raftflow.engine.ops.ui.server import Settings

from tests.unit.test_ui_security import client


@pytest.fixture()
def app(tmp_path: Path) -> Iterator[tuple[Engine, Any]]:
    """An engine and its workflow ``produce``."""
    engine = Engine()

    @engine.workflow
    def produce(n: int) -> int:
        engine.write_stream("tokens", "first")
        engine.recv("more", timeout=30)
        for i in range(n):
            engine.write_stream("tokens", {"i": i})
        engine.close_stream("tokens")
        return n

    engine.connect(f"sqlite:///{tmp_path / 'ui.db'}")
    try:
        yield engine, produce
    finally:
        engine.close()


def events(text: str) -> list[tuple[str, str, Any]]:
    """(event, id, data) of each server-sent event."""
    out = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        out.append(
            (fields.get("event", "message"), fields.get("id", ""), json.loads(fields["data"]))
        )
    return out


def test_the_execution_page_follows_its_streams_live(app: tuple[Engine, Any]) -> None:
    engine, produce = app
    with engine.running_worker(), client(engine, Settings()) as browser:
        handle = engine.start(produce, 3, execution_id="p1")
        deadline = time.monotonic() + 10
        while not engine.streams("p1"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        page = browser.get("/executions/p1")
        assert page.status_code == 200 and 'class="stream"' in page.text
        assert 'data-key="tokens"' in page.text and "/static/live.js" in page.text
        # Attached mid-stream: the request follows until the close.
        threading.Timer(0.3, lambda: engine.send("p1", None, topic="more")).start()
        response = browser.get("/api/stream?id=p1&key=tokens")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert events(response.text) == [
            ("message", "1", "first"),
            ("message", "2", {"i": 0}),
            ("message", "3", {"i": 1}),
            ("message", "4", {"i": 2}),
            ("end", "", {}),
        ]
        assert handle.result(timeout=10) == 3
        # A reconnection resumes after the last value it got.
        again = browser.get("/api/stream?id=p1&key=tokens", headers={"Last-Event-ID": "3"})
        assert events(again.text) == [("message", "4", {"i": 2}), ("end", "", {})]


def test_stream_requests_are_checked_like_every_page(app: tuple[Engine, Any]) -> None:
    engine = app[0]
    with client(engine, Settings()) as browser:
        assert browser.get("/api/stream?id=nope&key=k").status_code == 404
        assert browser.get("/api/stream?key=k").status_code == 400
        assert browser.get("/api/stream?id=x&key=k&offset=-1").status_code == 400
        assert browser.get("/api/stream?id=x&key=k&offset=one").status_code == 400
        evil = browser.get("/api/stream?id=x&key=k", headers={"Host": "evil.example:8080"})
        assert evil.status_code == 421
