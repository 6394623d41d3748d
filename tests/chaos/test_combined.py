"""Every fault in one run, some at the same time, on a dedicated cluster behind netcut proxies.

1. kill -9 of a worker and of the rqlite leader at once;
2. a worker stalled past its lease (SIGSTOP) while the new leader's link is blackholed;
3. heal, SIGCONT; SIGTERM of a worker; restart of the killed node (it rejoins);
4. kill -9 of a follower, restarted 2 s later; then every node must hold the same data.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from tests.chaos.netcut import ProxySet
from tests.chaos.scenario import Options, Scenario

pytestmark = pytest.mark.chaos

MakeScenario = Callable[..., Scenario]
ClusterFactory = Callable[..., LocalCluster]

CLIENT_TIMEOUTS = {"timeout": 1.0, "retry_timeout": 15.0}


def test_combined_faults(scenario: MakeScenario, rqlite_cluster_factory: ClusterFactory) -> None:
    cluster = rqlite_cluster_factory(3)
    options = Options(
        executions=80,
        produce_over=14.0,
        workers=4,
        visibility=3.0,
        worker_options=dict(CLIENT_TIMEOUTS),
        client_options=CLIENT_TIMEOUTS,
    )
    with ProxySet([node.http_port for node in cluster.nodes]) as proxies:
        s = scenario(
            "combined", cluster, options, worker_url=proxies.url, producer_url=proxies.url(0)
        )
        with s:
            # 1. a worker and the leader die at the same moment
            s.wait_steps(30)
            old_leader = cluster.leader()
            killed = s.pick_holder()
            kill = s.kill_worker(killed)
            leader_fault = s.cluster_fault(
                "kill -9 leader", old_leader.node_id, lambda: cluster.kill(old_leader)
            )
            s.spawn(wait=False)
            s.wait_recovered(leader_fault)

            # 2. a stalled worker while the new leader's link is blackholed
            leader = cluster.nodes.index(cluster.leader())
            cut = [w for w in s.live_workers() if w.index % len(proxies) == leader]
            stalled = s.pick_holder()
            stall = s.stall_worker(stalled)
            cut_fault = s.cut_link(proxies[leader], "blackhole", cut)
            time.sleep(3.0)
            proxies.heal()
            s.wait_recovered(stall)
            s.resume(stalled)
            s.wait_recovered(cut_fault)

            # 3. a graceful stop, and the killed node comes back
            s.terminate_worker(s.pick_holder())
            s.spawn(wait=False)
            s.cluster_fault(
                "restart killed node", old_leader.node_id, lambda: cluster.start_node(old_leader)
            )

            # 4. a follower dies and comes back
            follower = cluster.followers()[0]
            follower_fault = s.cluster_fault(
                "kill -9 follower", follower.node_id, lambda: cluster.kill(follower)
            )
            s.wait_recovered(follower_fault)
            time.sleep(max(0.0, follower_fault.at + 2.0 - time.monotonic()))
            cluster.start_node(follower)
            cluster.wait_ready()

            figures = s.finish(timeout=180)
            s.assert_no_early_takeover(killed, kill.held)
            s.assert_no_early_takeover(stalled, stall.held)
            for node in cluster.nodes:
                s.wait_caught_up(node.url)
    assert figures["faults"] == 7
