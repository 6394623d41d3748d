"""Ask the nodes of a local cluster how they are over HTTP (``/readyz``, ``/status``), and
wait until they are ready and agree on a leader."""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from raftflow.transports.rqlite.local.node import Node, check_alive, diagnostics, running_nodes

from raftflow.errors import ClusterError

__all__ = ["Probe", "agreed_leader", "leader_id", "raft_state", "served_by"]


class Probe:
    """The HTTP client of the cluster's own probes (credentials and CA as the cluster's).

    ``auth_file`` only serves the message of a 401.
    """

    def __init__(
        self,
        *,
        auth: tuple[str, str] | None,
        verify: str | os.PathLike[str] | ssl.SSLContext | bool,
        auth_file: Path | None = None,
    ) -> None:
        self.auth = auth
        self.verify = verify
        self.auth_file = auth_file
        self._client: httpx.Client | None = None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            verify: ssl.SSLContext | bool
            if isinstance(self.verify, (bool, ssl.SSLContext)):
                verify = self.verify
            else:
                verify = ssl.create_default_context(cafile=os.fspath(self.verify))
            self._client = httpx.Client(auth=self.auth, verify=verify)
        return self._client

    def _get(self, node: Node, path: str, deadline: float) -> httpx.Response | None:
        budget = min(1.0, max(0.05, deadline - time.monotonic()))
        try:
            response = self._http().get(node.url + path, timeout=budget)
        except httpx.HTTPError:
            return None
        if response.status_code == 401:
            raise ClusterError(
                f"{node.url}{path} answered 401: pass probe_auth=(user, password) of a user of "
                f"{self.auth_file} with the 'ready' and 'status' permissions"
            )
        return response

    def readyz(self, node: Node, deadline: float) -> bool:
        """True if ``node`` answers ``/readyz`` with 200 (it runs and knows a leader)."""
        response = self._get(node, "/readyz", deadline)
        return response is not None and response.status_code == 200

    def status(self, node: Node, deadline: float) -> dict[str, Any] | None:
        """``node``'s ``/status`` document, or None if it does not give one."""
        response = self._get(node, "/status", deadline)
        if response is None or response.status_code != 200:
            return None
        try:
            data = response.json()
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def wait_node_ready(self, node: Node, timeout: float) -> None:
        """Wait until ``node``'s own process answers ``/readyz`` with 200."""
        deadline = time.monotonic() + timeout
        while True:
            check_alive([node])
            if self.readyz(node, deadline) and served_by(node, self.status(node, deadline)):
                return
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"{node!r} did not become ready after restart\n{diagnostics([node])}"
                )
            time.sleep(0.05)

    def wait_ready(self, nodes: Sequence[Node], timeout: float) -> None:
        """Wait until every running, unpaused node of ``nodes`` answers ``/readyz`` with 200
        and all of them report the same leader, itself one of those nodes."""
        deadline = time.monotonic() + timeout
        while True:
            active = running_nodes(nodes)
            check_alive(nodes)
            if active and all(self.readyz(n, deadline) for n in active):
                statuses = {n.node_id: self.status(n, deadline) for n in active}
                ours = all(served_by(n, statuses[n.node_id]) for n in active)
                if ours and agreed_leader(active, statuses) is not None:
                    return
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"cluster not ready after {timeout}s"
                    f" (nodes: {list(nodes)!r})\n{diagnostics(nodes)}"
                )
            time.sleep(0.05)

    def leader(self, nodes: Sequence[Node], timeout: float) -> Node:
        """The running node that is Raft leader and that every other one names as leader."""
        deadline = time.monotonic() + timeout
        last: dict[str, dict[str, Any] | None] = {}
        while True:
            active = running_nodes(nodes)
            check_alive(nodes)
            last = {n.node_id: self.status(n, deadline) for n in active}
            found = agreed_leader(active, last)
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                summary = {
                    node_id: leader_id(status) if status else "no answer"
                    for node_id, status in last.items()
                }
                raise ClusterError(
                    f"no agreed leader after {timeout}s; leader seen by each node: "
                    f"{summary}\n{diagnostics(nodes, n=15)}"
                )
            time.sleep(0.05)


def agreed_leader(active: list[Node], statuses: dict[str, dict[str, Any] | None]) -> Node | None:
    """The one node of ``active`` that says it leads and that every other one names, if any."""
    claims = [
        n
        for n in active
        if (status := statuses.get(n.node_id)) is not None
        and raft_state(status) == "Leader"
        and leader_id(status) == n.node_id
    ]
    if len(claims) != 1:
        return None
    leader = claims[0]
    for node in active:
        status = statuses.get(node.node_id)
        if status is None or leader_id(status) != leader.node_id:
            return None
    return leader


def served_by(node: Node, status: dict[str, Any] | None) -> bool:
    """True if ``status`` came from ``node``'s own process, not from whatever else may be
    listening on its port (``/status`` reports the server's ``os.pid``)."""
    os_info = status.get("os") if status is not None else None
    return isinstance(os_info, dict) and os_info.get("pid") == node.pid


def raft_state(status: dict[str, Any]) -> str | None:
    store = status.get("store")
    raft = store.get("raft") if isinstance(store, dict) else None
    state = raft.get("state") if isinstance(raft, dict) else None
    return state if isinstance(state, str) else None


def leader_id(status: dict[str, Any]) -> str | None:
    store = status.get("store")
    leader = store.get("leader") if isinstance(store, dict) else None
    node_id = leader.get("node_id") if isinstance(leader, dict) else None
    return node_id if isinstance(node_id, str) and node_id else None
