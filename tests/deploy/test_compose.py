"""``deploy/docker-compose.yml``, run: its rqlite services come up (with the image built from
``deploy/rqlite.Dockerfile``, through the override ``docker-compose.ci.yml``: no registry
image can be pulled here), the compose file's own migrate and worker commands run on the
host against them, one node is killed mid-run, and every workflow finishes.

The worker image is not built here (its base, python:3.11-slim, cannot be pulled); the
workers are the same ``raftflow worker`` command the compose file gives the container.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from raftflow.engine.ops import demo
from raftflow.transports.rqlite.local import pick_free_ports
from raftflow.transports.rqlite.local.probe import leader_id
from raftflow.transports.rqlite.local.pytest_plugin import missing

from raftflow import Engine, Status
from tests.deploy.files import DEPLOY, Service, load_yaml, on_this_machine, stop_all
from tests.support import wait_until

pytestmark = pytest.mark.slow
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
OVERRIDE = Path(__file__).with_name("docker-compose.ci.yml")
NODES = ("rqlite1", "rqlite2", "rqlite3")


class Stack:
    """One compose project (its own name, so its network and volumes are its own)."""

    def __init__(self, compose: list[str], image: str, tmp: Path) -> None:
        self.project = f"raftflow-ci-{uuid.uuid4().hex[:8]}"
        self.ports = pick_free_ports(len(NODES))
        self.base = [*compose, "-p", self.project, "-f", str(COMPOSE_FILE), "-f", str(OVERRIDE)]
        self.env = {
            **os.environ,
            "RQLITE_IMAGE": image,
            "RQLITE_HTTP_PORT": str(self.ports[0]),
            "RQLITE2_HTTP_PORT": str(self.ports[1]),
            "RQLITE3_HTTP_PORT": str(self.ports[2]),
        }
        self.tmp = tmp

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [*self.base, *args], env=self.env, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done.stdout

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.ports]

    def url(self, shift: int = 0) -> str:
        hosts = [u.split("://", 1)[1] for u in self.urls]
        return "http://" + ",".join(hosts[shift:] + hosts[:shift])

    def ready(self) -> bool:
        try:
            return all(httpx.get(u + "/readyz", timeout=2).status_code == 200 for u in self.urls)
        except httpx.HTTPError:
            return False

    def leader(self) -> str:
        status = httpx.get(self.urls[0] + "/status", timeout=5).json()
        found = leader_id(status)
        assert found in NODES, status
        return found


@pytest.fixture
def stack(rqlite_image: str, tmp_path: Path) -> Iterator[Stack]:
    compose = shutil.which("docker-compose")
    if compose is None:
        message = "docker-compose is missing (Debian package docker-compose; .ci/engines)"
        missing(message)
    project = Stack([compose], rqlite_image, tmp_path)
    try:
        yield project
    finally:
        project.run("down", "--volumes", "--remove-orphans", "--timeout", "5")


@pytest.fixture
def demo_engine() -> Iterator[Engine]:
    yield demo.engine
    demo.engine.close()


def test_the_stack_runs_workflows_through_a_killed_node(
    stack: Stack, demo_engine: Engine, tmp_path: Path
) -> None:
    services = load_yaml(COMPOSE_FILE)["services"]
    stack.run("up", "--detach", *NODES)
    wait_until(stack.ready, timeout=60, interval=0.2)

    # The migrate service's command, then two of the worker service's, from the host.
    migrate = subprocess.run(
        on_this_machine(services["migrate"]["command"]),
        env={**os.environ, "RAFTFLOW_URL": stack.url()},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrate.returncode == 0, migrate.stderr
    assert "database schema: version" in migrate.stdout
    workers = [
        Service(
            on_this_machine(services["worker"]["command"]),
            tmp_path / f"worker-{i}.log",
            env={"RAFTFLOW_URL": stack.url(i)},
        )
        for i in range(2)
    ]
    try:
        demo_engine.connect(stack.url(2))
        orders = demo.orders(16)
        handles = [demo.start(order) for order in orders]
        wait_until(lambda: sum(h.status() is Status.SUCCEEDED for h in handles) >= 3, 60)
        victim = stack.leader()
        stack.run("kill", victim)  # SIGKILL: no graceful step-down
        receipts = [handle.result(timeout=120) for handle in handles]
    finally:
        codes = stop_all(workers)  # SIGTERM: they drain

    assert [r.order_id for r in receipts] == [o.id for o in orders]
    assert all(len(h.steps()) == demo.CALLS for h in handles)
    assert codes == [0, 0], [w.output()[-2000:] for w in workers]
    states = stack.run("ps", "-a")
    assert victim in states and "Exit 137" in states, states
