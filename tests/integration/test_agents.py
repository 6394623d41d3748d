"""A durable pydantic-ai agent (tests/apps/agents.py) whose worker is killed (SIGKILL) mid-run:
by its own tool after the second model request, or in the middle of the streamed answer.
Another worker resumes the run without asking the model or calling the tool again for the
calls already recorded; the event stream holds every event once, and the answer's text
deltas of each attempt that streamed it, told apart by ``attempt``. On a SQLite file and
on the shared 3-node cluster."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.rqlite.local.cluster import LocalCluster

from raftflow import Client
from tests.integration.workers import WorkerProcess

APP = "tests.apps.agents:engine"
pytestmark = pytest.mark.slow

#: The run's durable events: three model responses and the two tool results between them.
EVENTS = [
    ("model_response", 0, None),
    ("tool_result", None, "value-of-a"),
    ("model_response", 1, None),
    ("tool_result", None, "value-of-b"),
    ("model_response", 2, None),
]
ANSWER = "value-of-a value-of-b"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _run_killed_once(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A run whose first worker dies where ``marker`` says, finished by a second worker:
    its result and its stream."""
    monkeypatch.setenv("RAFTFLOW_AGENT_DIR", str(tmp_path))
    (tmp_path / marker).touch()
    execution_id = f"agent-{uuid.uuid4().hex}"
    with Client.from_url(url) as client:
        handle = client.start("librarian.run", {"prompt": "go"}, execution_id=execution_id)
        first = WorkerProcess(APP, url, tmp_path / "first.log", lease=2)
        try:
            assert first.process.wait(120) != 0, first.output()
        finally:
            first.stop()
        assert not (tmp_path / marker).exists()  # it died where the marker said
        second = WorkerProcess(APP, url, tmp_path / "second.log", lease=2)
        try:
            result = handle.result(timeout=120)
        finally:
            second.stop()
        stream = list(client.read_stream(execution_id, "agent-events", follow=False))
    assert result["output"] == ANSWER
    durable = [e for e in stream if e["event"] != "text_delta"]
    assert [(e["event"], e.get("request"), e.get("result")) for e in durable] == EVENTS
    return result, stream


def _texts(stream: list[dict[str, Any]]) -> tuple[list[int], list[str]]:
    """The requests that streamed text, and each attempt's text, in stream order; every
    delta comes before its request's response."""
    requests, texts, attempts = [], [], []
    for i, value in enumerate(stream):
        if value["event"] != "text_delta":
            continue
        requests.append(value["request"])
        if value["attempt"] not in attempts:
            attempts.append(value["attempt"])
            texts.append("")
        texts[attempts.index(value["attempt"])] += value["text"]
        later = [e.get("request") for e in stream[i:] if e["event"] == "model_response"]
        assert value["request"] in later
    return sorted(set(requests)), texts


def _resume_after_kill(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, stream = _run_killed_once(url, tmp_path, monkeypatch, "kill-once")
    # Killed in its second tool call: resumed, the third (last) request and the killed
    # tool call again; nothing else.
    assert (_lines(tmp_path / "model-calls"), _lines(tmp_path / "tool-calls")) == (3, 3)
    # The answer's text, streamed live by its one attempt (the tool calls have none).
    assert _texts(stream) == ([2], [ANSWER])


def _restream_after_kill(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, stream = _run_killed_once(url, tmp_path, monkeypatch, "kill-in-stream")
    # Killed while streaming the answer: only that request is made again.
    assert (_lines(tmp_path / "model-calls"), _lines(tmp_path / "tool-calls")) == (4, 2)
    # The killed attempt's first words stay on the stream; the retry streams the whole
    # answer again, under an attempt of its own; the response is there once.
    requests, texts = _texts(stream)
    assert requests == [2] and len(texts) == 2
    assert texts[0] == "value-of-a" and texts[1] == ANSWER


def test_a_killed_agent_run_resumes_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _resume_after_kill(f"sqlite:///{tmp_path / 'agents.db'}", tmp_path, monkeypatch)


def test_a_killed_agent_run_resumes_on_rqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rqlite_cluster: LocalCluster
) -> None:
    _resume_after_kill(rqlite_cluster.urls[0], tmp_path, monkeypatch)


def test_a_run_killed_mid_answer_streams_it_again_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _restream_after_kill(f"sqlite:///{tmp_path / 'agents.db'}", tmp_path, monkeypatch)


def test_a_run_killed_mid_answer_streams_it_again_on_rqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rqlite_cluster: LocalCluster
) -> None:
    _restream_after_kill(rqlite_cluster.urls[0], tmp_path, monkeypatch)
