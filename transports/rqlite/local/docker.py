"""One rqlite node in Docker, for machines without the binary (``pip install raftflow[docker]``)."""

from __future__ import annotations

import importlib
import time
from types import TracebackType
from typing import Any

import httpx
from raftflow.transports.rqlite.local.errors import ClusterError
from raftflow.transports.rqlite.local.install import RQLITE_VERSION

__all__ = ["DockerRqlite"]


class DockerRqlite:
    """One rqlite node in Docker (image ``rqlite/rqlite:8.26.8``), for machines without the
    binary. Needs ``pip install raftflow[docker]`` and a running Docker engine.

        with DockerRqlite() as node:
            httpx.get(node.url + "/readyz")
    """

    image = f"rqlite/rqlite:{RQLITE_VERSION}"

    def __init__(self, *, image: str | None = None, startup_timeout: float = 60.0) -> None:
        self.image = image or self.image
        self.startup_timeout = startup_timeout
        self._container: Any = None
        self.url = ""

    @staticmethod
    def available() -> bool:
        """True if testcontainers is installed and a Docker engine answers."""
        try:
            docker = importlib.import_module("docker")
            importlib.import_module("testcontainers.core.container")
        except ImportError:
            return False
        try:
            docker.from_env().ping()
        except Exception:
            return False
        return True

    def start(self) -> DockerRqlite:
        try:
            containers = importlib.import_module("testcontainers.core.container")
        except ImportError as exc:
            raise ClusterError(
                "DockerRqlite needs testcontainers: pip install 'raftflow[docker]'"
            ) from exc
        container = containers.DockerContainer(self.image).with_exposed_ports(4001)
        container.start()
        self._container = container
        host = container.get_container_host_ip()
        self.url = f"http://{host}:{container.get_exposed_port(4001)}"
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ClusterError(f"{self.image} not ready after {self.startup_timeout}s")

    def stop(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None

    def __enter__(self) -> DockerRqlite:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
