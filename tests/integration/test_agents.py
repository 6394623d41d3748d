"""A durable pydantic-ai agent (tests/apps/agents.py) whose worker is killed (SIGKILL, by
its own tool) after the second model request: another worker resumes the run without
asking the model or calling the tool again for the calls already recorded, and the event
stream holds every event once. On a SQLite file and on the shared 3-node cluster."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from raftflow.transports.rqlite.local.cluster import LocalCluster

from raftflow import Client
from tests.integration.workers import WorkerProcess

APP = "tests.apps.agents:engine"
pytestmark = pytest.mark.slow


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _resume_after_kill(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAFTFLOW_AGENT_DIR", str(tmp_path))
    (tmp_path / "kill-once").touch()
    execution_id = f"agent-{uuid.uuid4().hex}"
    with Client.from_url(url) as client:
        handle = client.start("librarian.run", {"prompt": "go"}, execution_id=execution_id)
        first = WorkerProcess(APP, url, tmp_path / "first.log", lease=2)
        try:
            assert first.process.wait(120) != 0, first.output()
        finally:
            first.stop()
        # Killed in its second tool call: two model requests made, the first tool call done.
        assert (_lines(tmp_path / "model-calls"), _lines(tmp_path / "tool-calls")) == (2, 2)
        second = WorkerProcess(APP, url, tmp_path / "second.log", lease=2)
        try:
            result = handle.result(timeout=120)
        finally:
            second.stop()
        assert result["output"] == "value-of-a value-of-b"
        # Resumed: the third (last) request, and the killed tool call again; nothing else.
        assert (_lines(tmp_path / "model-calls"), _lines(tmp_path / "tool-calls")) == (3, 3)
        events = list(client.read_stream(execution_id, "agent-events", follow=False))
    assert [(e["event"], e.get("result")) for e in events] == [
        ("model_response", None),
        ("tool_result", "value-of-a"),
        ("model_response", None),
        ("tool_result", "value-of-b"),
        ("model_response", None),
    ]


def test_a_killed_agent_run_resumes_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _resume_after_kill(f"sqlite:///{tmp_path / 'agents.db'}", tmp_path, monkeypatch)


def test_a_killed_agent_run_resumes_on_rqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rqlite_cluster: LocalCluster
) -> None:
    _resume_after_kill(rqlite_cluster.urls[0], tmp_path, monkeypatch)
