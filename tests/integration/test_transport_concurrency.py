"""Per-group exclusivity and order under contention from real OS processes.

Six consumer processes -- httpx, requests and the async twin (three tasks on one
transport) -- each talk to the 3-node cluster through a different node first, while a
producer process keeps publishing. Each consumer logs every message it handled with the
interval it spent on it, before acking. The log must show every message handled exactly
once, each group's messages in publish order, and never two intervals of one group that
overlap: the group was leased to one consumer at a time across the whole cluster.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.contract import QueueStats
from raftflow.transports.rqlite import RqliteTransport
from raftflow.transports.rqlite.local import LocalCluster

from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]

# Sized for this 2-core machine, where a 3-node cluster commits ~100-150 writes/s.
GROUPS, PER_GROUP = 30, 8  # published before the consumers start
MORE_PER_GROUP, NEW_GROUPS = 3, 6  # published by the producer process while they run
CONSUMER_KINDS = ["raftflow", "requests", "async", "httpx", "async-httpx", "raftflow"]
ASYNC_TASKS = 3


def rotated(urls: list[str], n: int) -> list[str]:
    return urls[n % len(urls) :] + urls[: n % len(urls)]


class Processes:
    """The worker processes of one test: started with logs, always stopped."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log_path = self.tmp_path / f"{name}.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.queue_worker", *args],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.started.append((name, process, log_path))
        return process

    def wait(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        name, _, log_path = next(entry for entry in self.started if entry[1] is process)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name} still running after {timeout}s:\n{log_path.read_text()}")
        assert code == 0, f"{name} exited with {code}:\n{log_path.read_text()}"

    def stop_all(self) -> None:
        for _, process, _ in self.started:
            if process.poll() is None:
                process.kill()
        for _, process, _ in self.started:
            process.wait(10)


def check_exclusive_and_ordered(records: list[dict[str, Any]], expected: dict[str, int]) -> None:
    """``expected``: messages per group, indexes 0..n-1 in publish order."""
    counts = Counter(record["uid"] for record in records)
    duplicated = {uid: n for uid, n in counts.items() if n > 1}
    assert duplicated == {}, f"handled more than once: {duplicated}"
    wanted = {f"{group}:{i}" for group, n in expected.items() for i in range(n)}
    assert set(counts) == wanted, (
        f"missing {sorted(wanted - set(counts))[:10]}, unexpected {sorted(set(counts) - wanted)}"
    )
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_group[record["group"]].append(record)
    for group, handled in by_group.items():
        handled.sort(key=lambda record: record["start"])
        order = [r["i"] for r in handled]
        assert order == list(range(expected[group])), f"group {group} out of order: {order}"
        seqs = [r["seq"] for r in handled]
        assert seqs == sorted(seqs), f"group {group} out of order: seq {seqs}"
        for before, after in itertools.pairwise(handled):
            assert before["end"] < after["start"], (
                f"group {group}: {before['worker']} (pid {before['pid']}) still worked on "
                f"#{before['i']} until {before['end']:.6f} when {after['worker']} "
                f"(pid {after['pid']}) started #{after['i']} at {after['start']:.6f}"
            )
    assert all(record["attempts"] == 1 for record in records)  # no lease ever lapsed


@pytest.mark.slow
def test_each_group_is_leased_to_one_process_at_a_time(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    urls = cluster.urls
    go, stop = tmp_path / "go", tmp_path / "stop"
    initial = [(f"g{g}", i) for i in range(PER_GROUP) for g in range(GROUPS)]
    later = [
        (f"g{g}", i) for i in range(PER_GROUP, PER_GROUP + MORE_PER_GROUP) for g in range(GROUPS)
    ]
    later += [(f"n{g}", i) for i in range(MORE_PER_GROUP) for g in range(NEW_GROUPS)]
    later.sort(key=lambda item: item[1])  # round by round across groups
    (tmp_path / "plan.json").write_text(json.dumps(later))
    expected = {f"g{g}": PER_GROUP + MORE_PER_GROUP for g in range(GROUPS)}
    expected |= {f"n{g}": MORE_PER_GROUP for g in range(NEW_GROUPS)}

    processes = Processes(tmp_path)
    try:
        consumers = []
        for n, kind in enumerate(CONSUMER_KINDS):
            consumers.append(
                processes.start(
                    f"consumer{n}-{kind}",
                    "consume",
                    # One node each: given several, a connection settles on the leader
                    # (NodeRing.forwarded); these are to go through every node.
                    "--urls", urls[n % len(urls)],
                    "--kind", kind,
                    "--tasks", str(ASYNC_TASKS),
                    "--worker", f"c{n}",
                    "--out", str(tmp_path / f"consumer{n}.jsonl"),
                    "--go", str(go),
                    "--stop", str(stop),
                )
            )  # fmt: skip
        producer = processes.start(
            "producer",
            "produce",
            "--urls", ",".join(rotated(urls, 2)),
            "--kind", "requests",
            "--plan", str(tmp_path / "plan.json"),
            "--go", str(go),
        )  # fmt: skip
        # While the processes import, the first batch goes in.
        with RqliteTransport.from_url(urls) as transport:
            for group, index in initial:
                uid = f"{group}:{index}"
                transport.publish(group, {"uid": uid, "i": index}, key=uid)
            go.touch()
            processes.wait(producer, timeout=60)
            wait_until(lambda: transport.stats().messages == 0, timeout=60, interval=0.2)
            stop.touch()
            for consumer in consumers:
                processes.wait(consumer, timeout=30)
            assert transport.stats() == QueueStats(messages=0, leased=0, parked=0, groups=0)
    finally:
        processes.stop_all()

    records, summaries = [], []
    for n in range(len(CONSUMER_KINDS)):
        for line in (tmp_path / f"consumer{n}.jsonl").read_text().splitlines():
            entry = json.loads(line)
            (summaries if "summary" in entry else records).append(entry)
    check_exclusive_and_ordered(records, expected)
    # Every process took part, and between them they went through every node.
    assert len(summaries) == len(CONSUMER_KINDS)
    assert all(summary["handled"] > 0 for summary in summaries), summaries
    assert {summary["node"] for summary in summaries} == set(urls)
    assert len({record["pid"] for record in records}) == len(CONSUMER_KINDS)


def _record(group: str, i: int, start: float, end: float, pid: int = 1) -> dict[str, Any]:
    return {
        "uid": f"{group}:{i}",
        "group": group,
        "i": i,
        "seq": i + 1,
        "attempts": 1,
        "start": start,
        "end": end,
        "pid": pid,
        "worker": f"w{pid}",
    }


@pytest.mark.parametrize(
    "records, problem",
    [
        ([_record("g", 0, 0, 1), _record("g", 1, 2, 3)], None),
        ([_record("g", 0, 0, 1), _record("g", 1, 1, 3, pid=2)], "still worked on"),
        ([_record("g", 0, 0, 2), _record("g", 1, 1, 3, pid=2)], "still worked on"),
        ([_record("g", 1, 0, 1), _record("g", 0, 2, 3)], "out of order"),
        ([_record("g", 0, 0, 1), _record("g", 0, 2, 3), _record("g", 1, 4, 5)], "more than once"),
        ([_record("g", 0, 0, 1)], "missing"),
    ],
)
def test_the_log_check_catches_overlap_duplicates_order_and_losses(
    records: list[dict[str, Any]], problem: str | None
) -> None:
    if problem is None:
        check_exclusive_and_ordered(records, {"g": 2})
    else:
        with pytest.raises(AssertionError, match=problem):
            check_exclusive_and_ordered(records, {"g": 2})
