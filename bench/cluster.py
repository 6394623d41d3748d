"""The local 3-node cluster as the benchmark sees it: who leads, how far the Raft log is,
and plain HTTP reads and writes for setup and progress (never in a measured path).

Worker ``i`` enters the cluster through node ``i % 3`` counted from the leader, so with
two workers one talks to the leader and one through a follower (which forwards to the
leader), as a real deployment would; the raw-ceiling clients use the same layout.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from raftflow.transports.rqlite.local import LocalCluster, Node


@dataclass(frozen=True)
class RaftMark:
    """The leader's Raft log position at one moment (``/status`` → ``store.raft``)."""

    leader: str
    applied_index: int
    last_log_index: int
    term: int
    at: float

    def as_json(self) -> dict[str, Any]:
        return {
            "leader": self.leader,
            "applied_index": self.applied_index,
            "last_log_index": self.last_log_index,
            "term": self.term,
        }


class BenchCluster:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.http = httpx.Client(timeout=60.0)
        self.refresh()

    def refresh(self) -> None:
        leader = self.cluster.leader()
        others = [n for n in self.cluster.nodes if n is not leader]
        self.nodes: list[Node] = [leader, *others]

    @property
    def leader_url(self) -> str:
        return self.nodes[0].url

    @property
    def node_pids(self) -> list[int]:
        return [n.pid for n in self.cluster.nodes if n.pid is not None]

    def entry_url(self, i: int) -> str:
        """All nodes, starting with node ``i`` counted from the leader (failover order)."""
        hosts = [n.url.split("://", 1)[1] for n in self.nodes]
        shift = i % len(hosts)
        return "http://" + ",".join(hosts[shift:] + hosts[:shift])

    def entry_node(self, i: int) -> str:
        return "leader" if i % len(self.nodes) == 0 else "follower"

    # -- Raft --------------------------------------------------------------------------

    def raft_mark(self) -> RaftMark:
        """The leader's applied index; asks every node, so a new leader is found too."""
        for _ in range(50):
            for node in self.cluster.nodes:
                try:
                    status = self.http.get(node.url + "/status").json()
                except (httpx.HTTPError, ValueError):
                    continue
                raft = status.get("store", {}).get("raft", {})
                if raft.get("state") == "Leader":
                    return RaftMark(
                        leader=node.node_id,
                        applied_index=int(raft["applied_index"]),
                        last_log_index=int(raft["last_log_index"]),
                        term=int(raft["term"]),
                        at=time.time(),
                    )
            time.sleep(0.1)
        raise RuntimeError("no node reports itself Raft leader")

    def settle(self, quiet: float = 0.25, timeout: float = 5.0) -> None:
        """Wait until the leader's applied index has not moved for ``quiet`` seconds.

        A phase ends when the parent sees every execution finished, which can be before
        the worker that wrote the last commit has read its response (and counted it);
        marking then would miss that entry. Waiting for the log to go quiet first makes
        the count exact."""
        deadline = time.monotonic() + timeout
        last = self.raft_mark().applied_index
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self.raft_mark().applied_index
            if now == last:
                return
            last = now

    # -- plain HTTP (setup and progress only) -----------------------------------------

    def execute(self, statements: Sequence[Sequence[Any]], *, transaction: bool = True) -> Any:
        params = {"transaction": ""} if transaction else {}
        response = self.http.post(
            self.leader_url + "/db/execute", params=params, json=[list(s) for s in statements]
        )
        response.raise_for_status()
        body = response.json()
        for result in body.get("results", []):
            if result.get("error"):
                raise RuntimeError(f"rqlite: {result['error']}")
        if body.get("error"):
            raise RuntimeError(f"rqlite: {body['error']}")
        return body["results"]

    def query(self, sql: str, *params: Any, level: str = "weak") -> list[list[Any]]:
        response = self.http.post(
            self.leader_url + "/db/query", params={"level": level}, json=[[sql, *params]]
        )
        response.raise_for_status()
        result = response.json()["results"][0]
        if result.get("error"):
            raise RuntimeError(f"rqlite: {result['error']}")
        values: list[list[Any]] = result.get("values") or []
        return values

    def scalar(self, sql: str, *params: Any) -> Any:
        rows = self.query(sql, *params)
        return rows[0][0] if rows else None

    def bulk(self, statements: Sequence[Sequence[Any]], per_request: int = 1000) -> int:
        """Many statements in multi-statement requests (one Raft entry per request)."""
        requests = 0
        for start in range(0, len(statements), per_request):
            self.execute(statements[start : start + per_request])
            requests += 1
        return requests

    def close(self) -> None:
        self.http.close()
