"""Fixtures shared by every suite. The rqlite fixtures (rqlite_cluster, rqlite_node,
rqlite_cluster_factory) come from the raftflow_rqlite pytest plugin, their container twins
(rqlite_cluster_containers, ...) from raftflow_rqlite_docker; ``rqlite_image`` is overridden
here to build the repository's image."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from raftflow.transports.rqlite.local.install import RQLITE_VERSION

from tests.support import LoopThread

ROOT = Path(__file__).resolve().parents[1]
OFFICIAL_IMAGE = f"rqlite/rqlite:{RQLITE_VERSION}"


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    """One background event loop for the session: async twins are driven on it."""
    loop = LoopThread()
    yield loop
    loop.close()


@pytest.fixture(scope="session")
def rqlite_image(request: pytest.FixtureRequest, docker_engine: None) -> str:
    """The container fixtures' image: ``deploy/rqlite.Dockerfile``, built once per session
    (no registry image can be pulled on raftflow's CI machines; the built image takes the
    same arguments as the official one). ``--rqlite-image rqlite/rqlite:8.26.8`` runs the
    same tests on the official image where it can be pulled."""
    from raftflow.transports.rqlite.local.containers import build_rqlite_image

    chosen = str(request.config.getoption("--rqlite-image"))
    if chosen != OFFICIAL_IMAGE:
        return chosen
    return build_rqlite_image(ROOT / "deploy" / "rqlite.Dockerfile")


def pytest_collection_finish(session: pytest.Session) -> None:
    """The simulator's seeds and the packages' build start with the session, on idle CPU
    (tests/background.py)."""
    from tests import background

    background.start_for(session.config, session.items)


def pytest_unconfigure(config: pytest.Config) -> None:
    from tests import background

    background.stop_all(config)
