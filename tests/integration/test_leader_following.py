"""A connection given followers first drifts to the leader and stays there (the shared
3-node cluster): a follower forwards every write and weak read to the leader, one hop more
each time, and says so in ``X-Rqlite-Served-By``."""

from __future__ import annotations

import asyncio

import httpx
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.rqlite.client import aconnect, connect
from raftflow.transports.rqlite.local import LocalCluster

WRITE = Request((Statement("t.write", "INSERT INTO leader_following (v) VALUES (1)"),))


def _followers_first(cluster: LocalCluster) -> tuple[list[str], str]:
    leader = cluster.leader().url
    return [*(node.url for node in cluster.nodes if node.url != leader), leader], leader


def _table(cluster: LocalCluster) -> None:
    httpx.post(
        f"{cluster.leader().url}/db/execute",
        json=[["CREATE TABLE IF NOT EXISTS leader_following (v INTEGER)"]],
        timeout=10,
    ).raise_for_status()


def test_a_sync_connection_moves_from_followers_to_the_leader(
    rqlite_cluster: LocalCluster,
) -> None:
    _table(rqlite_cluster)
    urls, leader = _followers_first(rqlite_cluster)
    connection = connect(urls)
    try:
        # connect() already read through the first follower (its readiness probe), so the
        # ring may have moved on; each follower forwards once at most, then it moves on.
        for _ in range(len(urls)):
            connection.send(WRITE).raise_for_errors()
        assert connection.ring.node() == leader
        for _ in range(5):
            connection.send(WRITE).raise_for_errors()
        assert connection.ring.node() == leader  # and stays
    finally:
        connection.close()


def test_an_async_connection_moves_from_followers_to_the_leader(
    rqlite_cluster: LocalCluster,
) -> None:
    _table(rqlite_cluster)
    urls, leader = _followers_first(rqlite_cluster)

    async def scenario() -> str:
        connection = await aconnect(urls)
        try:
            for _ in range(len(urls)):
                (await connection.send(WRITE)).raise_for_errors()
            # Concurrent requests all answered by the leader keep it.
            for response in await asyncio.gather(*(connection.send(WRITE) for _ in range(8))):
                response.raise_for_errors()
            return connection.ring.node()
        finally:
            await connection.close()

    assert asyncio.run(scenario()) == leader


def test_a_single_follower_url_keeps_serving(rqlite_cluster: LocalCluster) -> None:
    _table(rqlite_cluster)
    urls, _ = _followers_first(rqlite_cluster)
    connection = connect(urls[0])
    try:
        for _ in range(3):
            connection.send(WRITE).raise_for_errors()
        assert connection.ring.node() == urls[0]
    finally:
        connection.close()
