"""The benchmark still works: ``python -m bench --smoke`` runs end to end in seconds on
its own local cluster and writes the JSON that docs/performance.md is built from.

Benchmarks are scripts, not timed tests: nothing here asserts a speed, a latency, a CPU
or memory sample -- a machine's noise must never fail CI -- only that every figure is
reported (a number, not negative: what a clock or a sampler can give), that the counts
are what the code guarantees (exact by construction, or positive: every step costs Raft
entries), and what must never happen (a timer early, a deposit doubled).
"""

from __future__ import annotations

import json
import math
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
    (tmp_path / "stdout.txt").write_text(process.stdout)
    data: dict[str, Any] = json.loads(out.read_text())
    assert data["meta"]["settings"]["smoke"] is True
    assert data["meta"]["machine"]["cores"] >= 1
    return data


def _figure(data: Any, path: tuple[str | int, ...]) -> float:
    value: Any = data
    for key in path:
        present = key < len(value) if isinstance(key, int) else key in value
        assert present, f"missing {path}"
        value = value[key]
    assert isinstance(value, (int, float)) and math.isfinite(value), f"{path} = {value!r}"
    return float(value)


def positive(data: Any, *path: str | int) -> float:
    """A count the code guarantees positive (Raft entries, round trips, steps)."""
    value = _figure(data, path)
    assert value > 0, f"{path} = {value!r}"
    return value


def reported(data: Any, *path: str | int) -> float:
    """A measured figure (a time, a rate, a CPU or memory sample): there, and a number no
    clock or sampler can make negative -- its size is the machine's, never asserted."""
    value = _figure(data, path)
    assert value >= 0, f"{path} = {value!r}"
    return value


def test_default_smoke_reports_every_number(tmp_path: Path, rqlited_path: Path) -> None:
    data = run_bench(tmp_path)
    settings = data["meta"]["settings"]
    for mode in ("single_client", "concurrent"):
        reported(data, "raw", mode, "writes_per_s")
        reported(data, "raw", mode, "latency", "p50_ms")
    assert data["raw"]["concurrent"]["clients"] == settings["workers"] * settings["concurrency"]

    rf = data["raftflow"]
    assert rf["steps"] == rf["worker_steps"] == settings["executions"] * settings["steps"]
    assert rf["succeeded"] == settings["executions"]
    for key in ("steady_steps_per_s", "steps_per_s", "executions_per_s"):
        reported(data, "raftflow", key)
    for key in ("raft_per_step", "raft_per_step_applied", "round_trips_per_step"):
        positive(data, "raftflow", key)
    positive(data, "raftflow", "commits_per_request")
    reported(data, "raftflow", "step_to_step", "p50_ms")
    reported(data, "raftflow", "step_to_step", "p99_ms")
    reported(data, "raftflow", "worker_rss", "peak_mb")
    reported(data, "raftflow", "e2e", "client", "p50_ms")
    reported(data, "raftflow", "e2e", "client", "p99_ms")
    # Counted exactly: every Raft entry in the window is a worker's or a start()'s.
    if rf["elections"] == 0:
        # At most one entry outside the marks: a loaded machine (CI, load > 8) once showed
        # one, not reproduced in isolation; a systematic miss shows as many.
        assert 0 <= rf["raft_entries_unattributed"] <= 1, rf
    assert rf["raft_entries_client"] == settings["executions"]

    nv = data["naive"]
    assert nv["steps"] == settings["executions"] * settings["steps"]
    reported(data, "naive", "steady_steps_per_s")
    reported(data, "naive", "step_to_step", "p50_ms")
    # The spec's step: claim UPDATE, strong read-back, groups UPDATE, checkpoint, ack,
    # and a publish on every step but the last: at least 5 Raft entries per step.
    assert nv["raft_per_step"] >= 5
    assert nv["round_trips_per_step"] >= 5

    reported(data, "ratios", "raftflow_steps_per_raw_write")
    reported(data, "ratios", "naive_steps_per_raw_write")

    # Latency: C=1 and C=8 clients, a 1-step workflow in and across processes, the goals.
    for clients in ("1", "8"):
        reported(data, "latency", "clients", clients, "steps_per_s")
        reported(data, "latency", "clients", clients, "step_to_step", "p50_ms")
    reported(data, "latency", "one_in_process", "p50_ms")
    reported(data, "latency", "one_cross_process", "p50_ms")
    # One client's goals are judged against the floor's writes measured in the same rounds
    # (the httpx client's beside them), for async and sync workflows.
    paired = data["latency"]["paired"]
    assert len(paired["rounds"]) == 1 and paired["raw"]["writes"] > 0, paired
    assert paired["floor"]["writes"] > 0, paired
    reported(data, "latency", "paired", "raw", "latency", "p50_ms")
    reported(data, "latency", "paired", "floor", "latency", "p50_ms")
    reported(data, "latency", "paired", "c1_sync", "p50_ms")
    for n in range(len(paired["rounds"])):
        reported(paired, "rounds", n, "c1_ratio")
        reported(paired, "rounds", n, "floor_p50_ms")
    # CPU sampled over half a second (an idle worker's polls can sample 0.0): reported.
    reported(data, "latency", "idle_poll", "with_idle_worker_percent")
    reported(data, "latency", "idle_poll", "leader_core_percent")
    reported(data, "latency", "embedded_32", "steps_per_s")
    reported(data, "latency", "embedded_32", "step_to_step", "p99_ms")
    goals = data["latency"]["goals"]
    assert len(goals) == 9 and all(g["value"] is not None and "met" in g for g in goals), goals
    assert sum("floor p50" in g["goal"] for g in goals) == 4, goals

    # Transaction steps: the same E x K, each step debiting its execution's account once.
    tx = data["transactions"]
    assert tx["steps"] == settings["executions"] * settings["steps"]
    assert tx["succeeded"] == settings["executions"]
    reported(data, "transactions", "steady_steps_per_s")
    for key in ("raft_per_step_applied", "round_trips_per_step"):
        positive(data, "transactions", key)
    assert tx["ledger"] == {
        "rows": settings["executions"] * settings["steps"],
        "balance_left": 0,
        "doubled": 0,
        "exactly_once": True,
    }
    reported(data, "ratios", "transaction_steps_per_plain_step")

    timers = data["timers"]
    cases = timers["primitives"]["cases"]
    for case in cases:
        positive(data, "timers", "primitives", "cases", case, "entries_per_execution")
    assert len(cases) == 9
    # Each primitive costs entries of its own on top of the 1-step baseline.
    for case in ("sleep 2s", "recv+send", "child", "cancel", "retry 2s", "stream x10"):
        assert cases[case]["extra"] > 0, (case, cases[case])
    waiting = timers["waiting"]
    wakes = waiting["wakes"]
    sizes = [n for n in (settings["sleepers_light"], settings["sleepers"]) if n]
    assert [w["sleepers"] for w in wakes] == sizes and sizes
    for n, wake in enumerate(wakes):
        assert wake["woke"] == wake["sleepers"] and wake["early"] == 0, wake  # never early
        reported(waiting, "wakes", n, "lateness", "p50_ms")
    assert waiting["cancelled"] == settings["waiting"] // 2
    assert waiting["received"] == settings["waiting"] - settings["waiting"] // 2


@pytest.mark.extended
def test_long_smoke_reports_per_step_cost(tmp_path: Path, rqlited_path: Path) -> None:
    data = run_bench(tmp_path, "--mode", "long")
    settings = data["meta"]["settings"]
    rows = data["long"]["rows"]
    expected = [("sqlite", n) for n in settings["long_sizes"]] + [
        ("rqlite", n) for n in settings["long_rqlite_sizes"]
    ]
    for sticky in (256, 0):
        got = [(r["backend"], r["n"]) for r in rows if r["sticky_cache"] == sticky]
        assert sorted(got) == sorted(expected)
    for row in rows:
        assert row["steps"] == row["n"], row
        for key in ("per_step_ms", "first_window_ms", "last_window_ms"):
            reported(row, key)
        if row["sticky_cache"] == 0:  # every claim replays, reading the history so far
            assert row["resumed"] == 0, row
            assert row["history_rows_read"] >= row["n"] // 2, row
        else:  # every claim after the first resumes the kept run: no history read
            assert row["resumed"] == row["claims"] - 1, row
            assert row["history_rows_read"] == 0, row
        if row["backend"] == "rqlite":
            assert row["raft_per_step"] > 0, row
    assert "ms/step at N=" in data_text(tmp_path)
    goals = data["long"]["goals"]
    loop, memory = goals["sleep_loop"], goals["in_flight"]
    assert loop["wakes"] == settings["sleep_loop"], loop
    reported(loop, "first_wakes_ms")
    assert memory["executions"] == settings["inflight"], memory
    assert 0 < memory["kept_runs"] <= memory["sticky_cache"], memory
    reported(memory, "rss_mb_all_parked")


def data_text(tmp_path: Path) -> str:
    return (tmp_path / "stdout.txt").read_text()


@pytest.mark.extended
def test_scale_smoke_reports_claims_and_rss(tmp_path: Path, rqlited_path: Path) -> None:
    data = run_bench(tmp_path, "--mode", "scale")
    claims = data["claim_latency"]
    assert claims["sizes"][0] == 10 and claims["sizes"][-1] == data["meta"]["settings"]["queued"]
    for case in claims["cases"]:
        for label in claims["labels"]:
            reported(case, label, "p50_ms")
    assert claims["claim_plan"] and claims["naive_claim_plan"]
    rss = data["rss"]
    assert rss["steps"] == rss["points"][-1]["steps"]
    for point in rss["points"]:
        reported(point, "rss_mb")


@pytest.mark.slow
def test_cost_smoke_reports_cpu_per_request(tmp_path: Path, rqlited_path: Path) -> None:
    data = run_bench(tmp_path, "--mode", "cost")
    kinds = {row["request"]: row for row in data["requests"]}
    for name in (
        "raw INSERT x1",
        "raftflow commit x10 (engine)",
        "claim request, nothing claimable",
    ):
        reported(kinds[name], "wall_ms")
        reported(kinds[name], "cluster_cpu_ms")
    reported(kinds["raftflow commit x10 (engine)"], "commits_per_s_one_client")


def test_shards_smoke_splits_the_work_and_reports_each_cluster(
    tmp_path: Path, rqlited_path: Path
) -> None:
    data = run_bench(tmp_path, "--shards", "1,3")
    settings = data["meta"]["settings"]
    assert settings["mode"] == "shards" and settings["shards"] == [1, 3]
    executions, steps = settings["executions"], settings["steps"]
    runs = data["shards"]["runs"]
    assert [run["clusters"] for run in runs] == [1, 3]
    for run in runs:
        work = run["workload"]
        clusters = work["per_cluster"]
        names = [c["cluster"] for c in clusters]
        assert len(set(names)) == run["clusters"], names
        # The same workload for every N, split by the hash: every cluster got some, each
        # execution ran once on one cluster, all its steps there.
        assert work["executions"] == work["succeeded"] == executions
        assert work["steps"] == sum(c["steps"] for c in clusters) == executions * steps
        for c in clusters:
            assert c["executions"] > 0 and c["steps"] == c["executions"] * steps, c
            # A start is one Raft entry on its cluster (the first on a lone cluster also
            # reads, strongly, whether the cluster belongs to a deployment).
            assert c["executions"] <= c["raft_entries_client"] <= c["requests_client"], c
            positive(c, "raft_entries_workers")
            positive(c, "requests_workers")
            # The node's index counts what the workers and the starts sent it (a presence
            # beat between the index read and a worker's mark can fall either side).
            counted = c["raft_entries_workers"] + c["raft_entries_client"]
            assert abs(c["raft_entries"] - counted) <= 2, c
            reported(c, "leader_cpu_s")
        positive(work, "raft_per_step")
        reported(work, "steady_steps_per_s")
        reported(work, "worker_cpu_s")
        idle = run["idle"]
        assert [c["cluster"] for c in idle["per_cluster"]] == names
        for c in idle["per_cluster"]:
            reported(c, "requests_per_s_per_worker")
            reported(c, "leader_core_percent")
            assert c["raft_entries"] >= 0, c
        reported(idle, "worker_core_percent_per_worker")
        listing, connect = run["list"]["per_cluster"], run["connect"]["per_cluster"]
        assert set(listing) == set(connect) == set(names)
        # list() is one request to every cluster; a connect checks every cluster's schema.
        assert all(cost["requests"] == 1 for cost in listing.values()), listing
        assert all(cost["requests"] >= 1 for cost in connect.values()), connect
        reported(run, "list", "seconds")
        reported(run, "connect", "seconds")
        # The unbatched writes (starts with no worker): one Raft entry each, on its cluster.
        writes = run["single_writes"]["per_cluster"]
        assert sum(w["writes"] for w in writes.values()) == run["single_writes"]["writes"]
        for w in writes.values():
            assert w["raft_entries"] >= w["writes"] > 0, writes
            reported(w, "leader_cpu_ms_per_write")
    # A process reads the catalog from the first cluster only when it connects.
    sharded = runs[1]["connect"]["per_cluster"]
    catalog, *others = list(sharded)
    assert all(sharded[catalog]["requests"] > sharded[name]["requests"] for name in others)
    assert "requests/s per worker per cluster" in data_text(tmp_path)
