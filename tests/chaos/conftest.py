"""Fixtures of the chaos suite.

- ``shared_cluster`` (package): one 3-node cluster for the scenarios that never touch a
  node (worker faults, network cuts); ``chaos_cluster`` hands it over with raftflow's
  tables emptied. Scenarios that kill nodes use ``rqlite_cluster_factory`` instead.
- ``scenario``: ``scenario(name, cluster, options, **kwargs)`` makes a
  :class:`~tests.chaos.scenario.Scenario` whose processes are all stopped at teardown.
- ``figures_path`` (session): the JSON file every scenario appends its figures to, under
  pytest's temporary directory (printed at the end of the run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from raftflow.transports.rqlite.local import LocalCluster

from tests.chaos.scenario import Options, Scenario
from tests.support import clear_tables

_FIGURES: list[Path] = []


@pytest.fixture(scope="package")
def shared_cluster(rqlited_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(3, binary=rqlited_path) as cluster:
        yield cluster


@pytest.fixture
def chaos_cluster(shared_cluster: LocalCluster) -> LocalCluster:
    shared_cluster.wait_ready()
    clear_tables(shared_cluster.url)
    return shared_cluster


@pytest.fixture(scope="session")
def figures_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.getbasetemp() / "chaos-figures.json"
    _FIGURES.append(path)
    return path


@pytest.fixture
def scenario(tmp_path: Path, figures_path: Path) -> Iterator[Callable[..., Scenario]]:
    made: list[Scenario] = []

    def make(
        name: str, cluster: LocalCluster, options: Options | None = None, **kwargs: Any
    ) -> Scenario:
        log_dir = tmp_path / f"logs-{len(made)}"
        log_dir.mkdir()
        made.append(Scenario(name, cluster.urls, log_dir, figures_path, options, **kwargs))
        return made[-1]

    yield make
    for s in made:
        s.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for path in _FIGURES:
        if path.exists():
            terminalreporter.write_line(f"chaos figures: {path}")
