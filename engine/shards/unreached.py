"""A cluster of a sharded deployment that is out of reach when a process opens it.

One cluster down should not keep a process from serving the others: a worker (re)started
during one cluster's outage serves the clusters it reaches, and the one that is down as
soon as it answers. The catalog (on the first cluster, which must answer) says which
cluster names hold partitions. When exactly one listed cluster does not answer and
exactly one name is missing among those that do, the silent one is taken to be that
cluster. That is checked before anything else is sent to it: its identity (name,
catalog, deployment id) and its schema, as a connect does
(:class:`~raftflow.transports.db.database.FirstUse`). Until then its requests fail as
those to any cluster out of reach do (:class:`~raftflow.errors.UnavailableError`): its
executions wait, and the worker's run there retries.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftflow.stores import catalog as catalogs
from raftflow.stores.catalog import Identity
from raftflow.stores.rqlite import RqliteStore
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.database import ConnectOptions, FirstUse, open_unreached
from raftflow.transports.db.flow import Flow
from raftflow.transports.db.schema import ensure
from raftflow.transports.rqlite import RqliteTransport
from raftflow.transports.rqlite.urls import masked

from raftflow.errors import ConfigurationError, UnavailableError


def open_unreached_pair(
    url: str | Sequence[str],
    expected: Identity,
    max_payload_bytes: int,
    auto_migrate: bool | None,
    options: ConnectOptions,
) -> tuple[RqliteTransport, RqliteStore]:
    """The transport and store of a cluster that did not answer, taken to be ``expected``:
    checked (identity and schema) before its first request goes out."""
    first_use = FirstUse(lambda: verify(database.clock, url, expected, bool(auto_migrate)))
    database = open_unreached(url, first_use, **options)
    transport = RqliteTransport(database, max_event_bytes=max_payload_bytes)
    return transport, RqliteStore(database, max_payload_bytes=max_payload_bytes)


def verify(
    clock: Clock, url: str | Sequence[str], expected: Identity, auto_migrate: bool
) -> Flow[None]:
    """The cluster answers: it runs this code's schema (migrated if ``auto_migrate``) and
    is the cluster ``expected`` names, or :class:`~raftflow.errors.ConfigurationError`."""
    yield from ensure(auto_migrate)
    found = yield from catalogs.identity(clock)
    if found != expected:
        what = "unnamed" if found is None else f"{found.name!r} of deployment {found.deployment}"
        raise ConfigurationError(
            f"the cluster at {masked(str(url))}, out of reach when the deployment was opened, "
            f"was taken to be {expected.name!r} of deployment {expected.deployment}; it "
            f"answers now and is {what}: list the clusters of one deployment"
        )


def place_unreached(
    unreached: Sequence[int], missing: Sequence[str], urls: Sequence[str | Sequence[str]]
) -> dict[int, str]:
    """Which name each cluster out of reach (by its position in the URL) is taken to be:
    the one missing name when one cluster is out of reach; none when no name is missing
    (a cluster that holds no partition is left out until the process opens it again).
    :class:`~raftflow.errors.UnavailableError` when it cannot be told."""
    if not missing:
        return {}
    if len(unreached) == 1 and len(missing) == 1:
        return {unreached[0]: missing[0]}
    where = ", ".join(masked(str(urls[i])) for i in unreached)
    raise UnavailableError(
        f"clusters out of reach ({where}) while the catalog assigns partitions to "
        f"{list(missing)}, which the clusters that answered are not: which is which cannot "
        "be told until they answer"
    )
