"""README.md's agent example runs as shown, offline: its code (the model a ``FunctionModel``
that calls both tools, then streams its answer) registered on a SQLite file with a worker
running, then its two commands -- the start by name and the stream followed to its end."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from raftflow.engine.ops.cli import main

from raftflow import Engine

ROOT = Path(__file__).resolve().parents[2]


def example() -> tuple[str, list[list[str]]]:
    """The README's agent code and its shell commands."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("**AI agents**") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    shell = re.search(r"```sh\n(.*?)```", section, re.S)
    assert code is not None and shell is not None
    return code.group(1), [shlex.split(line, comments=True) for line in shell.group(1).splitlines()]


async def model(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    """Asks for the stock and the price, then answers with them a word at a time."""
    results = {
        p.tool_name: p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)
    }
    if not results:
        yield {
            0: DeltaToolCall(
                "stock", json.dumps({"item": "blue lamp", "city": "Paris"}), tool_call_id="s"
            ),
            1: DeltaToolCall("price", json.dumps({"item": "blue lamp"}), tool_call_id="p"),
        }
        return
    for word in f"{results['stock']} in stock, {results['price']} euros each.".split(" "):
        yield f"{word} "


class Shop:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def count(self, item: str, city: str) -> int:
        self.calls.append(f"count {item} {city}")
        return 3

    def price(self, item: str) -> float:
        self.calls.append(f"price {item}")
        return 49.5


def test_the_readme_agent_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, commands = example()
    assert '"openai:gpt-4o"' in code
    url = f"sqlite:///{tmp_path / 'readme.db'}"
    shop = Shop()
    with Engine.from_url(url) as engine:
        namespace: dict[str, Any] = {
            "engine": engine,
            "model": FunctionModel(stream_function=model),
            "inventory": shop,
            "catalogue": shop,
        }
        exec(compile(code.replace('"openai:gpt-4o"', "model"), "README.md", "exec"), namespace)
        start, stream = ([w.replace("$URL", url) for w in words] for words in commands)
        assert start[:2] == ["raftflow", "start"] and stream[:2] == ["raftflow", "stream"]
        with engine.running_worker():
            capsys.readouterr()
            assert main(start[1:]) == 0
            execution_id = capsys.readouterr().out.strip()
            assert main([execution_id if w == "ID" else w for w in stream[1:]]) == 0
    values = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    answer = "".join(v["text"] for v in values if v["event"] == "text_delta")
    assert answer.strip() == "3 in stock, 49.5 euros each."
    assert [v["event"] for v in values if v["event"] != "text_delta"] == [
        "model_response",
        "tool_result",
        "tool_result",
        "model_response",
    ]
    assert shop.calls == ["count blue lamp Paris", "price blue lamp"]
