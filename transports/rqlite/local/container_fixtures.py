"""pytest fixtures that run rqlite 8.26.8 in Docker (entry point ``raftflow_rqlite_docker``).

The container twins of :mod:`.pytest_plugin`'s fixtures; they need ``pip install
raftflow[docker]`` and a Docker engine, and import testcontainers only when a test uses them.

- ``docker_engine`` (session): nothing, once a Docker engine answers. No engine: a failure
  when ``$CI`` is set (unless ``RAFTFLOW_DOCKER_TESTS=skip`` says this CI has none on
  purpose), a skip with the reason otherwise.
- ``rqlite_image`` (session): the image to run, ``rqlite/rqlite:8.26.8`` unless
  ``--rqlite-image`` names another. Override this fixture in a ``conftest.py`` to build one
  (raftflow's own tests build ``deploy/rqlite.Dockerfile`` with
  :func:`~raftflow.transports.rqlite.local.containers.build_rqlite_image`).
- ``rqlite_container`` (session): a 1-node cluster in one container, shared.
- ``rqlite_cluster_containers`` (session): a 3-node cluster on its own network, shared by
  tests that only read and write: don't stop or kill its nodes.
- ``rqlite_cluster_containers_factory`` (function): ``factory(size=3, **kwargs)`` starts a
  dedicated :class:`RqliteClusterContainers`; all removed at teardown.

Testcontainers' reaper (Ryuk) is turned off unless ``TESTCONTAINERS_RYUK_DISABLED`` is set:
its image comes from Docker Hub, which not every CI reaches, and these fixtures remove what
they start themselves; at session end anything still labelled with this process's id is
removed too.

In your own test suite (deploy/README.md has it as a file that raftflow's tests run)::

    from raftflow.engine.ops.demo import checkout, engine, orders  # your app instead

    def test_checkouts_survive_losing_the_leader(rqlite_cluster_containers_factory):
        cluster = rqlite_cluster_containers_factory(3)
        engine.connect(cluster.raftflow_url)
        handles = [engine.start(checkout, order) for order in orders(5)]
        with engine.running_worker():
            cluster.stop_node(cluster.leader())   # docker stop; cluster.kill(node): SIGKILL
            receipts = [handle.result(timeout=60) for handle in handles]
        assert [r.order_id for r in receipts] == [o.id for o in orders(5)]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from raftflow.transports.rqlite.local.install import RQLITE_VERSION
from raftflow.transports.rqlite.local.lifecycle import report_leaks, started_clusters
from raftflow.transports.rqlite.local.pytest_plugin import missing

if TYPE_CHECKING:
    from raftflow.transports.rqlite.local.containers import RqliteClusterContainers

ContainersFactory = Callable[..., "RqliteClusterContainers"]
_CONTAINERS = "raftflow.transports.rqlite.local.containers"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rqlite-image",
        default=f"rqlite/rqlite:{RQLITE_VERSION}",
        help="image of the rqlite container fixtures (default: %(default)s)",
    )


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """Fails under CI and skips elsewhere when testcontainers or a Docker engine is missing."""
    try:
        from raftflow.transports.rqlite.local import containers
    except ImportError as exc:
        problem: str | None = (
            f"testcontainers is not installed ({exc}): pip install 'raftflow[docker]'"
        )
    else:
        problem = containers.docker_problem()
    if problem is not None:
        hint = "start one (raftflow's .ci/engines installs and starts dockerd as root)"
        message = f"Docker tests cannot run: {problem}; {hint}"
        if os.environ.get("RAFTFLOW_DOCKER_TESTS", "").strip().lower() == "skip":
            pytest.skip(message)
        missing(f"{message} (RAFTFLOW_DOCKER_TESTS=skip skips)")
    if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ:
        from testcontainers.core.config import testcontainers_config

        testcontainers_config.ryuk_disabled = True


@pytest.fixture(scope="session")
def rqlite_image(request: pytest.FixtureRequest, docker_engine: None) -> str:
    """The image the container fixtures run (``--rqlite-image``)."""
    return str(request.config.getoption("--rqlite-image"))


@pytest.fixture(scope="session")
def rqlite_container(rqlite_image: str) -> Iterator[RqliteClusterContainers]:
    """A 1-node cluster in one container, shared by the session."""
    from raftflow.transports.rqlite.local.containers import RqliteClusterContainers

    with RqliteClusterContainers(1, image=rqlite_image) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def rqlite_cluster_containers(rqlite_image: str) -> Iterator[RqliteClusterContainers]:
    """A 3-node container cluster shared by the session (read/write only: don't stop nodes)."""
    from raftflow.transports.rqlite.local.containers import RqliteClusterContainers

    with RqliteClusterContainers(3, image=rqlite_image) as cluster:
        yield cluster


@pytest.fixture
def rqlite_cluster_containers_factory(rqlite_image: str) -> Iterator[ContainersFactory]:
    """Start dedicated container clusters (``factory(size=3, **kwargs)``); removed at teardown."""
    from raftflow.transports.rqlite.local.containers import RqliteClusterContainers

    def make(size: int = 3, **kwargs: Any) -> RqliteClusterContainers:
        kwargs.setdefault("image", rqlite_image)
        return RqliteClusterContainers(size, **kwargs)

    with started_clusters(make) as factory:
        yield factory


@pytest.hookimpl(trylast=True)  # after the session fixtures' own teardown
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Safety net: remove the containers and networks this process labelled and left."""
    containers = sys.modules.get(_CONTAINERS)
    if containers is None:  # no container fixture ran: nothing to sweep, no Docker to ask
        return
    if containers.docker_problem() is not None:  # none could be made (the tests said why)
        return
    leaked = containers.remove_labelled()
    if leaked:
        count = len(leaked)
        report_leaks(
            session,
            f"raftflow_rqlite_docker: removed {count} leaked container(s)/network(s): {leaked}",
        )
