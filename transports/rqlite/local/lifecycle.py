"""What the local clusters and their fixtures share: start and stop around a block, and a
factory that stops every cluster it started (the processes' and the containers' alike)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from raftflow.errors import ClusterError

if TYPE_CHECKING:
    import pytest


class Stoppable(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


S = TypeVar("S", bound="ClusterBase")
C = TypeVar("C", bound=Stoppable)


class Node(Protocol):
    @property
    def url(self) -> str: ...


class ClusterBase:
    """A local cluster of nodes: ``with cluster:`` starts it and stops it on the way out."""

    nodes: Sequence[Node]

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    @property
    def url(self) -> str:
        """The first node's URL."""
        if not self.nodes:
            raise ClusterError("cluster not started")
        return self.nodes[0].url

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self: S) -> S:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def started_clusters(make: Callable[..., C]) -> Iterator[Callable[..., C]]:
    """A factory of started clusters (``factory(size=3, **kwargs)``, made by ``make``);
    every one of them is stopped when the block ends, even one whose start failed, the last
    first -- all of them, then the first error is raised."""
    clusters: list[C] = []

    def factory(*args: Any, **kwargs: Any) -> C:
        cluster = make(*args, **kwargs)
        clusters.append(cluster)
        cluster.start()
        return cluster

    try:
        yield factory
    finally:
        errors: list[BaseException] = []
        for cluster in reversed(clusters):
            try:
                cluster.stop()
            except Exception as exc:  # stop the others anyway, then report
                errors.append(exc)
        if errors:
            raise errors[0]


def report_leaks(session: pytest.Session, message: str) -> None:
    """A line in pytest's summary (the session-end sweeps found something left running)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(message, yellow=True)
