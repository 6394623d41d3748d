"""Move partitions of a sharded deployment to another cluster (``raftflow move-partitions``).

The procedure, with the deployment's workers stopped (a move refuses executions a worker
holds) and its clients idle -- drain, copy, epoch bump:

1. **Copy**: each cluster losing partitions first refuses their starts from then on (the
   partition fence, :mod:`raftflow.stores.placement`: a process on the older catalog gets
   :class:`~raftflow.errors.StaleCatalogError`); then every queue group of them (an
   execution with all it has, a cron schedule's group) and their rate-limit reservations
   are copied to the new cluster, a batch per transaction, idempotently
   (:mod:`raftflow.stores.moves`).
2. **Bump**: the catalog assigns the partitions to the new cluster, epoch + 1, in one
   compare-and-set write (:func:`raftflow.stores.catalog.reassign`).
3. **Clean**: the copied rows are deleted where they were.

A move that stops part way (a crash, a cluster out of reach) is run again with the same
arguments: what was copied is not copied twice, a catalog already bumped is left as it
is, and what is left on a cluster that no longer holds its partition is deleted. Then the
workers and clients start again on the deployment's URL (the new cluster listed), and
read the new catalog as they connect.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from raftflow.engine.shards.deployment import Shard, Shards
from raftflow.engine.shards.partitions import key_route, partition_of
from raftflow.stores import catalog as catalogs
from raftflow.stores import moves, placement

from raftflow.errors import ConfigurationError

#: Queue groups per copy transaction.
MOVE_BATCH = 100


@dataclass(frozen=True)
class MoveReport:
    """What a move did: the partitions now on ``to``, the groups and rows copied from each
    cluster, the catalog's epoch after it."""

    partitions: tuple[int, ...]
    to: str
    groups: dict[str, int]
    rows: int
    epoch: int


def move_partitions(
    shards: Shards, partitions: Iterable[int], to: str, batch: int = MOVE_BATCH
) -> MoveReport:
    """Move ``partitions`` to the cluster named ``to`` (one of ``shards``, listed in the
    deployment's URL). See the module's doc for the procedure and its preconditions."""
    home = shards.shards[0].store
    catalog = home.run(catalogs.catalog(home.clock))
    if catalog is None or not shards.sharded:
        raise ConfigurationError("move-partitions is for a sharded deployment (a URL with ';')")
    wanted = sorted(set(partitions))
    bad = [p for p in wanted if not 0 <= p < catalog.partitions]
    if bad or not wanted:
        raise ConfigurationError(
            f"partitions are 0..{catalog.partitions - 1}: {bad or 'none given'}"
        )
    names = {shard.name: shard for shard in shards}
    if to not in names:
        raise ConfigurationError(f"no cluster {to!r} in the URL (it has {sorted(names)})")
    moved: dict[str, int] = {}
    rows = 0
    target = names[to].store
    target.run(placement.arrived(wanted))
    for shard in shards:
        if shard.name == to:
            continue
        leaving = {p for p in wanted if catalog.assignment[p] == shard.name}
        if leaving:  # fenced first: a start that arrives during the copy is refused
            fence = placement.moved_away(shard.store.clock, sorted(leaving), to, catalog.epoch + 1)
            shard.store.run(fence)
            count, copied = _copy(shard, names[to], leaving, catalog.partitions, batch)
            moved[shard.name], rows = count, rows + copied
    if any(catalog.assignment[p] != to for p in wanted):
        assignment = [to if p in wanted else name for p, name in enumerate(catalog.assignment)]
        catalog = home.run(catalogs.reassign(home.clock, catalog, assignment))
    for shard in shards:  # what each cluster holds of partitions it no longer holds
        if shard.name != to:
            _clean(shard, set(wanted), catalog.partitions, batch)
    return MoveReport(tuple(wanted), to, moved, rows, catalog.epoch)


def _selected(shard: Shard, chosen: set[int], partitions: int) -> tuple[list[str], list[str]]:
    """The queue groups and rate keys of ``shard`` in the ``chosen`` partitions."""
    store = shard.store
    ids = [g for g in store.run(moves.groups()) if partition_of(g, partitions) in chosen]
    keys = [
        k for k in store.run(moves.rate_keys()) if partition_of(key_route(k), partitions) in chosen
    ]
    return ids, keys


def _copy(
    source: Shard, target: Shard, leaving: set[int], partitions: int, batch: int
) -> tuple[int, int]:
    ids, keys = _selected(source, leaving, partitions)
    rows = 0
    for start in range(0, max(len(ids), 1), batch):
        chunk, chunk_keys = ids[start : start + batch], keys if start == 0 else []
        read = source.store.run(moves.read(source.store.clock, chunk, chunk_keys))
        target.store.run(moves.write(read))
        rows += read.count
    return len(ids), rows


def _clean(shard: Shard, moved: set[int], partitions: int, batch: int) -> None:
    ids, keys = _selected(shard, moved, partitions)
    for start in range(0, max(len(ids), 1), batch):
        chunk: Sequence[str] = ids[start : start + batch]
        if chunk or (keys and start == 0):
            shard.store.run(moves.delete(chunk, keys if start == 0 else []))
