"""A network cut between the workers and the rqlite leader, on loopback.

Workers (and the producer) reach the cluster through one proxy per node
(:mod:`tests.chaos.netcut`); worker ``n`` enters through proxy ``n % 3``. The leader's
proxy is cut while work runs: the workers that entered through it must move to the other
nodes, whose followers forward their requests to the leader over rqlite's own links, and
everything must complete. Short client timeouts (``--timeout 1``) bound how long a
request waits on a blackholed link before the client tries the next node.
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

CLIENT_TIMEOUTS = {"timeout": 1.0, "retry_timeout": 10.0}
CUT_FOR = 3.0


@pytest.mark.parametrize("mode", ["blackhole", "refuse"])
def test_cut_between_workers_and_leader(
    scenario: MakeScenario, chaos_cluster: LocalCluster, mode: str
) -> None:
    options = Options(
        visibility=5.0, worker_options=dict(CLIENT_TIMEOUTS), client_options=CLIENT_TIMEOUTS
    )
    with ProxySet([node.http_port for node in chaos_cluster.nodes]) as proxies:
        s = scenario(
            f"network cut ({mode})",
            chaos_cluster,
            options,
            worker_url=proxies.url,
            producer_url=proxies.url(0),
        )
        with s:
            s.wait_steps(40)
            leader = chaos_cluster.nodes.index(chaos_cluster.leader())
            cut = [w for w in s.live_workers() if w.index % len(proxies) == leader]
            assert cut, "some worker must enter through the leader's node"
            fault = s.cut_link(proxies[leader], mode, cut)
            # The cut workers record steps again: through a follower, which forwards.
            recovery = s.wait_recovered(fault, timeout=30)
            assert recovery < CLIENT_TIMEOUTS["retry_timeout"]
            time.sleep(max(0.0, fault.at + CUT_FOR - time.monotonic()))
            assert proxies[leader].mode == mode
            proxies.heal()
            s.finish()
