"""bench.shard_model: the projection of N clusters from measured per-cluster figures.

Pure arithmetic over a made-up measurement (no cluster, no timing): what it must say
whatever the figures are -- the busiest cluster's share from the real hash, throughput
never above N leaders' worth, sends to other clusters costing entries and throughput.
"""

from __future__ import annotations

import pytest

from bench.shard_model import Assumed, Measured, project, skews

MEASURED = Measured(
    runs=1,
    leader_cpu_per_step=0.0002,
    raft_per_step=0.1,
    leader_cpu_per_write=0.001,
    worker_cpu_per_step=0.0001,
    idle_requests_per_s=10.0,
    leader_cpu_per_idle_request=0.0005,
    connect_catalog_entries=2,
    connect_other_entries=1,
    list_seconds_per_cluster=0.002,
)


def assumed(send_share: float, sizes: tuple[int, ...] = (8, 48, 64)) -> Assumed:
    return Assumed(sizes, 256, 20_000, 1.0, 1.0, send_share, 10.0, 1.0)


def test_partitions_that_do_not_divide_evenly_skew_the_busiest_cluster() -> None:
    skew = skews([8, 48, 64], 256, 100_000)
    assert all(value >= 1.0 for value in skew.values())
    # 256 over 48 clusters: some hold 6 partitions where the mean is 5.33 (+12.5 %);
    # over 8 or 64, each holds the same number and only the keys' hash varies.
    assert skew[48] > 1.1 > max(skew[8], skew[64])
    assert skews([48], 1024, 100_000)[48] < skew[48]  # more partitions even it out


def test_throughput_is_at_most_n_leaders_and_sends_across_clusters_cost() -> None:
    quiet = project(MEASURED, assumed(0.0))
    chatty = project(MEASURED, assumed(0.1))
    for q, c in zip(quiet, chatty):
        n = q["clusters"]
        assert q["linear_steps_per_s"] == pytest.approx(n / MEASURED.leader_cpu_per_step, 1e-3)
        assert q["steps_per_s"] == pytest.approx(q["linear_steps_per_s"] / q["skew"], 1e-3)
        assert q["lost_to_sends"] == 0 and q["raft_per_step"] == MEASURED.raft_per_step
        assert c["steps_per_s"] < q["steps_per_s"] and c["lost_to_sends"] > 0
        # a send's target is on another cluster with probability (N-1)/N: one entry each
        assert c["raft_per_step"] == pytest.approx(0.1 + 0.1 * (n - 1) / n, abs=1e-4)
        assert c["process_start_raft_entries"] == 2 + (n - 1)
        assert c["list_ms"] == pytest.approx(n * 2.0)
    # what every worker on every cluster costs each leader grows with N
    polls = [row["idle_polls_per_s_per_leader"] for row in quiet]
    assert polls == sorted(polls) and polls[0] < polls[-1]
