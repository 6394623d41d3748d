"""The clusters a process opened: one (unsharded) or several (a sharded deployment).

Each cluster is a :class:`Shard`: a transport and a store on its database, the store
sharing the transport's connection (a commit acks and publishes in the same request).
Everything of one execution -- its queue group, records, timers, signals, streams --
lives on the cluster of its partition (:func:`Shards.of`), so each execution keeps its one
total order and its single-entry commits; nothing of it spans clusters.

A URL with ``;`` lists the clusters of a sharded deployment, the catalog's first
(``"http://a1:4001,a2:4001;http://b1:4001"``; SQLite files work too, for tests). The first
process that opens a deployment names its clusters (``shard-1``, ``shard-2``... in URL
order) and writes its catalog (:data:`DEFAULT_PARTITIONS` partitions dealt in turn);
every later one checks that the URL lists the same deployment.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from raftflow.engine.shards.partitions import partition_of
from raftflow.engine.shards.unreached import open_unreached_pair, place_unreached
from raftflow.stores import catalog as catalogs
from raftflow.stores.catalog import Catalog, Identity
from raftflow.stores.rqlite import RqliteStore
from raftflow.stores.store import SqlStore
from raftflow.transports.db.database import ConnectOptions, scheme_of
from raftflow.transports.rqlite import RqliteTransport
from raftflow.transports.rqlite.urls import masked, split_clusters
from raftflow.transports.transport import SqlTransport

from raftflow.errors import ConfigurationError, UnavailableError

log = logging.getLogger("raftflow.shards")

#: Partitions of a new deployment: many more than it will ever have clusters, so that
#: moving partitions evens the load out (a partition is the unit that moves).
DEFAULT_PARTITIONS = 256


@dataclass(frozen=True)
class Shard:
    """One cluster of the deployment: its name, its transport and its store."""

    name: str
    transport: SqlTransport
    store: SqlStore

    @property
    def identity(self) -> str:
        """Where it is (its database's identity: no credentials)."""
        return self.transport.database.identity


class Shards:
    """The clusters of a deployment, and the routing of an execution to its own."""

    def __init__(self, shards: Sequence[Shard], catalog: Catalog | None) -> None:
        if not shards:
            raise ConfigurationError("a deployment has at least one cluster")
        self.shards = tuple(shards)
        #: None: one cluster, every execution on it.
        self.catalog = catalog
        self._by_name = {shard.name: shard for shard in self.shards}
        self._startable = catalog is not None
        if catalog is not None:  # each start carries its partition: the fence of a move
            fenced = functools.partial(partition_of, partitions=catalog.partitions)
            for shard in self.shards:
                shard.store.flows.partition_of = fenced

    def check_startable(self) -> None:
        """Refuse to start executions on a lone cluster of a sharded deployment (opened by
        its own URL: its executions can be read and run there, but a start would bypass
        the routing). Read once, at the first start (a weak read: no Raft entry)."""
        if self._startable:
            return
        store = self.shards[0].store
        # Weak only: a cluster is named when its deployment is created, long before this
        # (an unsharded database, the usual case, pays no Raft entry for the check).
        member = store.run(catalogs.identity(store.clock, strong_if_empty=False))
        if member is not None:
            raise ConfigurationError(
                f"this cluster is {member.name!r} of a sharded deployment: start executions "
                "through the deployment's URL (its clusters, ';'-separated), which routes "
                "each to its cluster"
            )
        self._startable = True

    @property
    def sharded(self) -> bool:
        return self.catalog is not None

    def of(self, execution_id: str) -> Shard:
        """The cluster that holds ``execution_id`` (or would, once started)."""
        catalog = self.catalog
        if catalog is None:
            return self.shards[0]
        return self._by_name[catalog.assignment[partition_of(execution_id, catalog.partitions)]]

    def __iter__(self) -> Iterator[Shard]:
        return iter(self.shards)

    def __len__(self) -> int:
        return len(self.shards)

    def close(self) -> None:
        for shard in self.shards:
            shard.transport.close()
            if shard.store.database is not shard.transport.database:  # a split pair
                shard.store.close()


def shard_urls(url: str | Sequence[str]) -> list[str | Sequence[str]]:
    """The URL of each cluster: ``;`` separates clusters (a list is one cluster's nodes)."""
    parts = split_clusters(url) if isinstance(url, str) else []
    if len(parts) < 2:
        return [url]
    if not all(parts):
        raise ConfigurationError(f"an empty cluster URL in {masked(str(url))!r} (between two ';')")
    return list(parts)


def open_shards(
    url: str | Sequence[str],
    max_payload_bytes: int,
    auto_migrate: bool | None,
    options: ConnectOptions,
    partitions: int | None = None,
) -> Shards:
    """Open every cluster of ``url`` (each schema checked as :func:`open_pair` does) and,
    for several, the deployment's catalog (written by the first process to open it). A
    cluster other than the first that does not answer is opened unchecked when the
    catalog tells which it is (:mod:`~raftflow.engine.shards.unreached`)."""
    urls = shard_urls(url)
    opened: list[tuple[SqlTransport, SqlStore] | None] = []
    try:
        for position, one in enumerate(urls):
            try:
                opened.append(open_pair(one, max_payload_bytes, auto_migrate, options))
            except UnavailableError as exc:
                if position == 0 or scheme_of(one) != "rqlite":
                    raise
                log.warning("cluster %s is out of reach: %s", masked(str(one)), exc)
                opened.append(None)
        if len(opened) == 1 and opened[0] is not None:
            return Shards([Shard("", *opened[0])], None)

        def unreached(position: int, expected: Identity) -> tuple[SqlTransport, SqlStore]:
            pair = open_unreached_pair(
                urls[position], expected, max_payload_bytes, auto_migrate, options
            )
            opened[position] = pair
            return pair

        return _deployment(opened, partitions, urls, unreached)
    except BaseException:
        for pair in opened:
            if pair is not None:
                pair[0].close()
        raise


def _deployment(
    opened: Sequence[tuple[SqlTransport, SqlStore] | None],
    partitions: int | None,
    urls: Sequence[str | Sequence[str]],
    unreached: Callable[[int, Identity], tuple[SqlTransport, SqlStore]],
) -> Shards:
    """Name the clusters (those not named yet), check they form one deployment, and read
    (or write) its catalog."""
    reached = [(position, pair) for position, pair in enumerate(opened) if pair is not None]
    stores = [store for _position, (_transport, store) in reached]
    found = [store.run(catalogs.identity(store.clock)) for store in stores]
    taken = {identity.name for identity in found if identity is not None}
    first = found[0]
    if first is None:  # the catalog's cluster: its own catalog's, in a new deployment
        name = _free_name(1, taken)
        claim = catalogs.claim_identity(stores[0].clock, name, name, uuid.uuid4().hex)
        first = stores[0].run(claim)
    home = first.catalog
    if first.name != home:
        raise ConfigurationError(
            f"the first cluster listed ({stores[0].database.identity}) is {first.name!r}, "
            f"not its deployment's catalog {home!r}: list the clusters of one deployment, "
            "the catalog's first"
        )
    identities = [first]
    taken.add(first.name)
    for (position, (_transport, store)), identity in zip(reached[1:], found[1:]):
        if identity is None:
            claim = catalogs.claim_identity(
                store.clock, _free_name(position + 1, taken), home, first.deployment
            )
            identity = store.run(claim)
            taken.add(identity.name)
        identities.append(identity)
    for store, identity in zip(stores, identities):
        if identity.catalog != home or identity.deployment != first.deployment:
            raise ConfigurationError(
                f"the cluster at {store.database.identity} is {identity.name!r} of another "
                f"deployment than the first cluster's (its catalog on {identity.catalog!r}, "
                f"id {identity.deployment}; the first's on {home!r}, id "
                f"{first.deployment}): list the clusters of one deployment, the catalog's first"
            )
    names = [identity.name for identity in identities]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"a cluster is listed twice: {names}")
    catalog = stores[0].run(catalogs.catalog(stores[0].clock))
    silent = [position for position, pair in enumerate(opened) if pair is None]
    if catalog is None:
        if silent:
            raise UnavailableError("a new deployment needs every cluster it lists to answer")
        _check_empty(stores)
        catalog = stores[0].run(
            catalogs.create_catalog(
                stores[0].clock, Catalog.spread(partitions or DEFAULT_PARTITIONS, names)
            )
        )
    if partitions is not None and partitions != catalog.partitions:
        raise ConfigurationError(
            f"the deployment has {catalog.partitions} partitions, fixed when it was created, "
            f"not {partitions}"
        )
    missing = sorted(set(catalog.assignment) - set(names))
    shards = [Shard(name, *pair) for name, (_position, pair) in zip(names, reached)]
    placed = place_unreached(silent, missing, urls) if silent else {}
    for position, name in placed.items():
        pair = unreached(position, Identity(name, home, first.deployment))
        shards.insert(position, Shard(name, *pair))
    missing = [name for name in missing if name not in placed.values()]
    if missing:
        raise ConfigurationError(
            f"the catalog assigns partitions to {missing}, which the URL does not list"
        )
    return Shards(shards, catalog)


def _free_name(position: int, taken: set[str]) -> str:
    name, n = f"shard-{position}", position
    while name in taken:
        n += 1
        name = f"shard-{n}"
    return name


def _check_empty(stores: Sequence[SqlStore]) -> None:
    """A new deployment starts from empty clusters: the executions of a database that
    was used unsharded would mostly route elsewhere, out of reach."""
    for store in stores:
        if store.run(catalogs.holds_executions()):
            raise ConfigurationError(
                f"the cluster at {store.database.identity} holds executions: a sharded "
                "deployment starts from empty clusters (its executions would route "
                "elsewhere and be out of reach)"
            )


def open_pair(
    url: str | Sequence[str],
    max_payload_bytes: int,
    auto_migrate: bool | None,
    options: ConnectOptions,
) -> tuple[SqlTransport, SqlStore]:
    """The transport and store on one cluster's ``url`` (:class:`~raftflow.RqliteTransport`
    and :class:`~raftflow.RqliteStore` on rqlite), the store on the transport's connection,
    the schema checked (an older one migrated only with ``auto_migrate``; None: on SQLite)."""
    rqlite = scheme_of(url) == "rqlite"
    transport_class = RqliteTransport if rqlite else SqlTransport
    store_class = RqliteStore if rqlite else SqlStore
    transport = transport_class.from_url(
        url, create_schema=False, max_event_bytes=max_payload_bytes, **options
    )
    try:
        store = store_class(transport.database, max_payload_bytes=max_payload_bytes)
        store.create_schema(auto_migrate)
    except BaseException:
        transport.close()
        raise
    return transport, store
