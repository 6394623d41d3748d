"""A sharded deployment's catalog: how many partitions, which cluster holds each.

The catalog is one row in the deployment's first cluster (the one listed first in its
URL): kept in the database, not in a file, so every process reads the same one and a move
of a partition (a new assignment, its epoch + 1) is one compare-and-set write that the
processes see at their next read, with no configuration to redeploy. Each cluster also
knows its own name and the catalog it belongs to (its *identity*), so a URL that lists
the clusters in another order, or a cluster of another deployment, is refused instead of
routing executions to the wrong place.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raftflow.stores.rows import read
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request

from raftflow.errors import ConfigurationError

SQL = load("raftflow.stores", "catalog.sql", "catalog")


@dataclass(frozen=True, slots=True)
class Identity:
    """A cluster's name, the name of the cluster that holds its catalog, and its
    deployment's id (None for a deployment created before migration 17)."""

    name: str
    catalog: str
    deployment: str | None = None


@dataclass(frozen=True, slots=True)
class Catalog:
    """The partitions of a deployment: ``assignment[p]`` is the name of partition ``p``'s
    cluster; ``epoch`` counts the assignments made."""

    partitions: int
    epoch: int
    assignment: tuple[str, ...]

    @classmethod
    def spread(cls, partitions: int, clusters: Sequence[str]) -> Catalog:
        """A new deployment's catalog: partitions dealt to the clusters in turn."""
        return cls(partitions, 1, tuple(clusters[p % len(clusters)] for p in range(partitions)))

    def partitions_of(self, cluster: str) -> list[int]:
        return [p for p, name in enumerate(self.assignment) if name == cluster]


def identity(clock: Clock, *, strong_if_empty: bool = True) -> Flow[Identity | None]:
    """The cluster's identity, None for a cluster no deployment has named (read again at
    ``strong`` level when the weak read finds none, unless told not to)."""
    rows = yield from read(SQL("identity", {}), strong_if_empty=strong_if_empty)
    return None if not rows else _identity(rows[0])


def claim_identity(clock: Clock, name: str, catalog: str, deployment: str | None) -> Flow[Identity]:
    """Name the cluster ``name`` in ``catalog``'s deployment (whose id is ``deployment``),
    unless it has a name: the identity it has after the write (another's, if it had one)."""
    now = yield from clock.now()
    params = {"name": name, "catalog": catalog, "deployment": deployment, "now": now}
    response = yield Request((SQL("claim_identity", params), SQL("identity", {})), level="strong")
    return _identity(response.raise_for_errors()[1].dicts()[0])


def _identity(row: dict[str, Any]) -> Identity:
    deployment = row.get("deployment")
    return Identity(
        str(row["name"]), str(row["catalog"]), None if deployment is None else str(deployment)
    )


def catalog(clock: Clock) -> Flow[Catalog | None]:
    """The catalog, read at ``strong`` level (a stale node could show an older epoch)."""
    response = yield Request((SQL("catalog", {}),), level="strong")
    rows = response.raise_for_errors()[0].dicts()
    return None if not rows else _catalog(rows[0])


def create_catalog(clock: Clock, proposed: Catalog) -> Flow[Catalog]:
    """Write ``proposed`` unless a catalog exists: the catalog there is after the write."""
    now = yield from clock.now()
    params = {
        "partitions": proposed.partitions,
        "assignment": json.dumps(list(proposed.assignment)),
        "now": now,
    }
    response = yield Request((SQL("create_catalog", params), SQL("catalog", {})), level="strong")
    return _catalog(response.raise_for_errors()[1].dicts()[0])


def reassign(clock: Clock, current: Catalog, assignment: Sequence[str]) -> Flow[Catalog]:
    """Replace ``current``'s assignment (compare and set on its epoch): the catalog after
    it; :class:`ConfigurationError` if another change came first."""
    if len(assignment) != current.partitions:
        raise ConfigurationError(
            f"an assignment names {current.partitions} partitions' clusters, not {len(assignment)}"
        )
    now = yield from clock.now()
    params = {"assignment": json.dumps(list(assignment)), "epoch": current.epoch, "now": now}
    response = yield Request((SQL("reassign", params), SQL("catalog", {})), level="strong")
    results = response.raise_for_errors()
    if results[0].rows_affected != 1:
        raise ConfigurationError(
            f"the catalog changed since epoch {current.epoch}: read it again and retry"
        )
    return _catalog(results[1].dicts()[0])


def holds_executions() -> Flow[bool]:
    """Whether the cluster holds any execution (read at ``strong`` level)."""
    response = yield Request((SQL("any_execution", {}),), level="strong")
    return bool(response.raise_for_errors()[0].rows)


def _catalog(row: dict[str, Any]) -> Catalog:
    assignment = json.loads(row["assignment"])
    return Catalog(int(row["partitions"]), int(row["epoch"]), tuple(str(a) for a in assignment))
