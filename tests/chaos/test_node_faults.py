"""rqlite node faults, each on a dedicated 3-node cluster: kill -9 of the leader, of a
follower, the restart of a killed node, and a full stop and restart of every node."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from tests.chaos.scenario import Options, Scenario

pytestmark = pytest.mark.chaos

MakeScenario = Callable[..., Scenario]
ClusterFactory = Callable[..., LocalCluster]

# Leases longer than a leader election, as in production (where they are 30 s).
NODE_FAULT_OPTIONS = Options(visibility=5.0)


def test_leader_kill_9_twice_and_restart(
    scenario: MakeScenario, rqlite_cluster_factory: ClusterFactory
) -> None:
    """kill -9 the leader; a new one is elected and the work goes on; the killed node
    restarts from its data dir, rejoins and catches up. Then again with the new leader."""
    cluster = rqlite_cluster_factory(3)
    with scenario("kill -9 leader", cluster, NODE_FAULT_OPTIONS) as s:
        for round_ in range(2):
            s.wait_steps(40 + 100 * round_)
            leader = cluster.leader()
            fault = s.cluster_fault(
                "kill -9 leader", leader.node_id, lambda node=leader: cluster.kill(node)
            )
            s.wait_recovered(fault)
            cluster.start_node(leader)
            cluster.wait_ready()
        s.finish()
        for node in cluster.nodes:
            s.wait_caught_up(node.url)


def test_follower_kill_9_and_restart(
    scenario: MakeScenario, rqlite_cluster_factory: ClusterFactory
) -> None:
    """kill -9 a follower: the leader keeps its quorum, workers that entered through the
    dead node move to another; restarted 2 s later, the node catches up."""
    cluster = rqlite_cluster_factory(3)
    with scenario("kill -9 follower", cluster, NODE_FAULT_OPTIONS) as s:
        s.wait_steps(40)
        follower = cluster.followers()[0]
        fault = s.cluster_fault(
            "kill -9 follower", follower.node_id, lambda: cluster.kill(follower)
        )
        s.wait_recovered(fault)
        s.wait_steps(s.snapshot().total_steps + 30)  # work goes on without it
        time.sleep(max(0.0, fault.at + 2.0 - time.monotonic()))
        restart = s.cluster_fault(
            "restart follower", follower.node_id, lambda: cluster.start_node(follower)
        )
        s.wait_recovered(restart)
        s.finish()
        counts = s.wait_caught_up(follower.url)
    assert counts["succeeded"] == counts["executions"] == 60


@pytest.mark.parametrize(
    "kill_every_node",
    # The graceful twin (every node stopped by SIGTERM) runs in make test-extended.
    [pytest.param(False, marks=pytest.mark.extended), True],
    ids=["sigterm", "kill-9"],
)
def test_full_cluster_stop_and_restart(
    scenario: MakeScenario, rqlite_cluster_factory: ClusterFactory, kill_every_node: bool
) -> None:
    """Every node stops mid-run and restarts from its data dir 3 s later.

    sigterm: a clean stop; the workers ride it out (their requests retry for 15 s).
    kill-9: every node killed with ``kill -9``, and clients that give up after 2 s: commits
    fail, their leases lapse, claims keep retrying -- and still everything resumes, nothing
    acknowledged lost. Not a power loss: the processes die, the machine does not, so what
    the nodes wrote but did not fsync survives in the page cache (docs/reliability.md).
    """
    cluster = rqlite_cluster_factory(3)
    if kill_every_node:
        retries = {"retry_timeout": 2.0}
        options = Options(visibility=3.0, worker_options=dict(retries), client_options=retries)
        name, kind = "kill -9 of every node", "kill -9 all nodes"
    else:
        options, name, kind = NODE_FAULT_OPTIONS, "full cluster stop", "stop all nodes"
    with scenario(name, cluster, options) as s:
        s.wait_steps(40)

        def stop_and_restart() -> None:
            if kill_every_node:
                for node in cluster.nodes:
                    cluster.kill(node)
            else:
                cluster.stop_all_nodes()
            time.sleep(3.0)
            cluster.start_all_nodes()

        fault = s.cluster_fault(kind, "3 s down", stop_and_restart)
        recovery = s.wait_recovered(fault)
        assert recovery > 3.0
        figures: dict[str, Any] = s.finish()
        for node in cluster.nodes:
            s.wait_caught_up(node.url)
    assert figures["lost"] == 0
