"""Reads right after a full cluster restart: what the kill -9 of every node exposed (fixed:
an empty or failed weak answer is now read again at ``strong`` before it is believed).

After every node restarts, the newly elected leader answers ``weak`` reads before it has
applied the committed log: for a moment it serves a state older than acknowledged writes,
even one without raftflow's tables. rqlite 8.26 only checks, for ``weak``, that the node
is the leader; it does not wait for the FSM to catch up (``strong`` goes through the log
and is always right). raftflow's read API uses ``weak`` (``stores/flows.py``: get, steps,
list, counts, and so ``Engine.get`` and ``WorkflowHandle.status/result/steps``), so in
that moment an existing execution is "not found" and a read fails with
"no such table: executions".

The moment lasts as long as the new leader takes to apply the log since the last snapshot:
a few ms to hundreds in the chaos runs. Here log entries that are slow to apply (each
counts a few hundred thousand generated rows) stretch it to seconds, so it is always seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx
import pytest
from raftflow.transports.rqlite.local import LocalCluster

from raftflow import Engine
from raftflow.errors import ExecutionNotFoundError, RaftflowError, UnavailableError

pytestmark = pytest.mark.chaos

ClusterFactory = Callable[..., LocalCluster]
FILLER_WRITES = 20  # log entries after the schema and before the execution
FILLER_ROWS = 200_000  # rows each entry counts when applied (~tens of ms of CPU)

engine = Engine()


@engine.workflow
def noop(value: int) -> int:
    return value


def _fill_the_log(url: str) -> None:
    """Log entries that are slow to apply: the new leader needs seconds to catch up."""
    heavy = (
        "INSERT INTO filler (v) SELECT COUNT(*) FROM (WITH RECURSIVE n(i) AS "
        "(SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT i FROM n)"
    )
    with httpx.Client(timeout=30) as client:
        client.post(f"{url}/db/execute", json=[["CREATE TABLE filler (v INTEGER)"]])
        for _ in range(FILLER_WRITES):
            response = client.post(f"{url}/db/execute", json=[[heavy, FILLER_ROWS]])
            response.raise_for_status()
            assert "error" not in response.json()["results"][0], response.text


def test_reads_after_a_full_restart_see_every_acknowledged_write(
    rqlite_cluster_factory: ClusterFactory,
) -> None:
    cluster = rqlite_cluster_factory(3)
    # A short retry budget: the reader asks again at once instead of backing off through
    # the moment. "Unavailable" is an honest answer; only definite answers are judged.
    engine.connect(",".join(cluster.urls), timeout=0.5, retry_timeout=0.2)
    try:
        _fill_the_log(cluster.leader().url)
        handle = engine.start(noop, 1, execution_id="written-last")
        assert handle.created

        for node in cluster.nodes:
            cluster.kill(node)
        answers: list[str] = []
        stop = threading.Event()

        def read_until_stopped() -> None:
            while not stop.is_set() and answers.count("found") < 100:
                try:
                    engine.get("written-last")
                    answers.append("found")
                except ExecutionNotFoundError:
                    answers.append("not found")
                except UnavailableError:
                    continue
                except RaftflowError as exc:
                    answers.append(f"{type(exc).__name__}: {exc}")

        reader = threading.Thread(target=read_until_stopped, daemon=True)
        reader.start()
        cluster.start_all_nodes()
        reader.join(30)  # until the leader has caught up and the execution is found
        stop.set()
        reader.join(5)
    finally:
        engine.close()
    wrong = [a for a in answers if a != "found"]
    assert answers and not wrong, f"{len(wrong)} of {len(answers)} reads wrong: {wrong[:3]}"
