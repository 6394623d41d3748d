"""The benchmark still works: ``python -m bench --smoke`` runs end to end in seconds on
its own local cluster and writes the JSON that docs/performance.md is built from.

Benchmarks are scripts, not timed tests: nothing here asserts a speed, only that every
number is there and positive, and the counts that are exact by construction.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_bench(tmp_path: Path, *args: str, timeout: float = 300) -> dict[str, Any]:
    out = tmp_path / "bench.json"
    process = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--json", str(out), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert process.returncode == 0, process.stdout[-2000:] + process.stderr[-4000:]
    assert "JSON: " in process.stdout
    data: dict[str, Any] = json.loads(out.read_text())
    assert data["meta"]["settings"]["smoke"] is True
    assert data["meta"]["machine"]["cores"] >= 1
    return data


def positive(data: dict[str, Any], *path: str) -> float:
    value: Any = data
    for key in path:
        assert key in value, f"missing {'.'.join(path)}"
        value = value[key]
    assert isinstance(value, (int, float)) and value > 0, f"{'.'.join(path)} = {value!r}"
    return float(value)


def test_default_smoke_reports_every_number(tmp_path: Path, rqlited_path: Path) -> None:
    data = run_bench(tmp_path)
    settings = data["meta"]["settings"]
    for mode in ("single_client", "concurrent"):
        positive(data, "raw", mode, "writes_per_s")
        positive(data, "raw", mode, "latency", "p50_ms")
    assert data["raw"]["concurrent"]["clients"] == settings["workers"] * settings["concurrency"]

    rf = data["raftflow"]
    assert rf["steps"] == rf["worker_steps"] == settings["executions"] * settings["steps"]
    assert rf["succeeded"] == settings["executions"]
    for key in (
        "steady_steps_per_s",
        "steps_per_s",
        "executions_per_s",
        "raft_per_step",
        "raft_per_step_applied",
        "round_trips_per_step",
        "commits_per_request",
    ):
        positive(data, "raftflow", key)
    positive(data, "raftflow", "step_to_step", "p50_ms")
    positive(data, "raftflow", "step_to_step", "p99_ms")
    positive(data, "raftflow", "worker_rss", "peak_mb")
    positive(data, "raftflow", "e2e", "client", "p50_ms")
    positive(data, "raftflow", "e2e", "client", "p99_ms")
    # Counted exactly: every Raft entry in the window is a worker's or a start()'s.
    if rf["elections"] == 0:
        assert rf["raft_entries_unattributed"] == 0, rf
    assert rf["raft_entries_client"] == settings["executions"]

    nv = data["naive"]
    assert nv["steps"] == settings["executions"] * settings["steps"]
    positive(data, "naive", "steady_steps_per_s")
    positive(data, "naive", "step_to_step", "p50_ms")
    # The spec's step: claim UPDATE, strong read-back, groups UPDATE, checkpoint, ack,
    # and a publish on every step but the last: at least 5 Raft entries per step.
    assert nv["raft_per_step"] >= 5
    assert nv["round_trips_per_step"] >= 5

    positive(data, "ratios", "raftflow_steps_per_raw_write")
    positive(data, "ratios", "naive_steps_per_raw_write")

    # Transaction steps: the same E x K, each step debiting its execution's account once.
    tx = data["transactions"]
    assert tx["steps"] == settings["executions"] * settings["steps"]
    assert tx["succeeded"] == settings["executions"]
    for key in ("steady_steps_per_s", "raft_per_step_applied", "round_trips_per_step"):
        positive(data, "transactions", key)
    assert tx["ledger"] == {
        "rows": settings["executions"] * settings["steps"],
        "balance_left": 0,
        "doubled": 0,
        "exactly_once": True,
    }
    positive(data, "ratios", "transaction_steps_per_plain_step")


@pytest.mark.slow
def test_scale_smoke_reports_claims_and_rss(tmp_path: Path, rqlited_path: Path) -> None:
    data = run_bench(tmp_path, "--mode", "scale")
    claims = data["claim_latency"]
    assert claims["sizes"][0] == 10 and claims["sizes"][-1] == data["meta"]["settings"]["queued"]
    for case in claims["cases"]:
        for label in claims["labels"]:
            assert case[label]["p50_ms"] > 0, (case["queued"], label)
    assert claims["claim_plan"] and claims["naive_claim_plan"]
    rss = data["rss"]
    assert rss["steps"] == rss["points"][-1]["steps"]
    assert all(point["rss_mb"] > 0 for point in rss["points"])


@pytest.mark.slow
def test_cost_smoke_reports_cpu_per_request(tmp_path: Path, rqlited_path: Path) -> None:
    data = run_bench(tmp_path, "--mode", "cost")
    kinds = {row["request"]: row for row in data["requests"]}
    for name in (
        "raw INSERT x1",
        "raftflow commit x10 (engine)",
        "claim request, nothing claimable",
    ):
        assert kinds[name]["wall_ms"] > 0 and kinds[name]["cluster_cpu_ms"] >= 0, kinds[name]
    assert kinds["raftflow commit x10 (engine)"]["commits_per_s_one_client"] > 0
