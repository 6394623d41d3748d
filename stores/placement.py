"""The partition fence: a cluster of a sharded deployment refuses to start an execution of
a partition it gave away (migration 17).

A move of partitions (``raftflow move-partitions``) records on each cluster that loses
partitions which ones leave, before it copies them. A sharded start then carries its
execution's partition in the same transaction (:func:`fence`): on a cluster the partition
has left, the transaction aborts and nothing is written, so a process routing by an
older catalog -- one not restarted after the move, or a start arriving during the copy --
gets :class:`~raftflow.errors.StaleCatalogError` instead of an execution out of reach of
every process on the new catalog. The partition comes from the deployment
(``StoreFlows.partition_of``, set when it is opened): the store does not hash ids itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request, Response, Statement

from raftflow.errors import StaleCatalogError

SQL = load("raftflow.stores", "placement.sql", "placement")

#: The partition of an execution id in a sharded deployment (None: unsharded).
PartitionOf = Callable[[str], int] | None


def fence(partition_of: PartitionOf, execution_id: str) -> tuple[Statement, ...]:
    """The statement that aborts a start's transaction on a cluster its execution's
    partition has left; none when unsharded (an unsharded start pays nothing)."""
    if partition_of is None:
        return ()
    return (SQL("partition_fence", {"partition": partition_of(execution_id)}),)


def refuse_moved(response: Response, execution_id: str) -> None:
    """Raise :class:`~raftflow.errors.StaleCatalogError` if the fence refused the start."""
    if any(
        r.error is not None and "raftflow: partition moved" in r.error for r in response.results
    ):
        raise StaleCatalogError(
            f"execution {execution_id!r} was not started: its partition has moved to "
            "another cluster since this process read the deployment's catalog (restart it "
            "with the deployment's current URL)"
        )


def moved_away(clock: Clock, partitions: Sequence[int], cluster: str, epoch: int) -> Flow[None]:
    """On a cluster losing ``partitions`` to ``cluster`` (catalog ``epoch``): refuse their
    starts from now on (a move's first write, before it copies them)."""
    now = yield from clock.now()
    params = {"partitions": json.dumps(list(partitions)), "cluster": cluster, "epoch": epoch}
    response = yield Request((SQL("moved_away", {**params, "now": now}),))
    response.raise_for_errors()


def arrived(partitions: Sequence[int]) -> Flow[None]:
    """On the cluster receiving ``partitions``: lift the fence of an earlier move away."""
    response = yield Request((SQL("arrived", {"partitions": json.dumps(list(partitions))}),))
    response.raise_for_errors()
