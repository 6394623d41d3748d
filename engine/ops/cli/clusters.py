"""Commands on the clusters themselves: ``migrate`` (each cluster of a sharded deployment in
turn) and ``shards`` (the deployment's catalog: which cluster holds which partitions, and
what each holds)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import click
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.output import json_option, print_json, table
from raftflow.engine.ops.scatter import gather, inspector_of
from raftflow.engine.shards.deployment import DEFAULT_PARTITIONS, open_shards, shard_urls
from raftflow.stores import catalog as catalogs
from raftflow.stores import outbox
from raftflow.stores.records import Status
from raftflow.transports.db.database import ConnectOptions
from raftflow.transports.payload import MAX_PAYLOAD_BYTES
from raftflow.transports.rqlite.urls import masked


@click.command()
@click.option("--dry-run", is_flag=True, help="Print the SQL, apply nothing.")
@click.option("--to", "target", type=int, help="Stop at this version (default: the latest).")
@connection_options
@json_option
def migrate(dry_run: bool, target: int | None, conn: Connection, as_json: bool) -> None:
    """Bring the database's schema to this raftflow's version (a sharded deployment's URL:
    each of its clusters, in turn). Each migration is one transaction (all or nothing);
    safe to run from several places at once.

    \b
    Example:
      raftflow migrate --url http://10.0.0.1:4001 --dry-run
      raftflow migrate --url 'http://a1:4001,a2:4001;http://b1:4001,b2:4001'
    """
    urls = [str(url) for url in shard_urls(conn.require_url())]
    options = conn.options()
    say: Callable[[str], None] = (lambda text: None) if as_json else click.echo
    done = []
    for position, url in enumerate(urls, start=1):
        if len(urls) > 1:
            gap = "\n" if position > 1 else ""
            say(f"{gap}== cluster {position} of {len(urls)}: {masked(url)}")
        done.append(_migrate(url, options, dry_run, target, say))
    if as_json:
        clusters = [{"url": masked(url), **one} for url, one in zip(urls, done)]
        print_json(done[0] if len(urls) == 1 else {"clusters": clusters})


def _migrate(
    url: str, options: dict[str, Any], dry_run: bool, target: int | None, say: Callable[[str], None]
) -> dict[str, Any]:
    """Migrate the database at ``url`` (or say what would be applied): its JSON summary."""
    from raftflow.transports.db import schema
    from raftflow.transports.db.database import open_database

    database = open_database(url, **options)
    try:
        state = database.run(schema.read_state())
        described = "empty" if state.empty else f"version {state.version}"
        say(f"database schema: {described}; this raftflow runs version {schema.LATEST}")
        goal = schema.LATEST if target is None else target
        pending = schema.MIGRATIONS[state.version : goal]
        if dry_run:
            for migration in pending:
                say(f"-- migration {migration.version}: {migration.name}")
                say(migration.sql())
            say(f"dry run: {len(pending)} migration(s) would be applied" if pending else "")
            return {"version": state.version, "pending": [m.version for m in pending]}
        applied = database.run(schema.migrate(goal, state=state))
        for migration in applied:
            say(f"applied migration {migration.version}: {migration.name}")
        final = database.run(schema.read_state())
        skipped = len(pending) - len(applied)
        others = f" ({skipped} applied by another migrator)" if skipped else ""
        say(f"database schema: version {final.version}{others}")
        return {"version": final.version, "applied": [m.version for m in applied]}
    finally:
        database.close()


@dataclass(frozen=True)
class ClusterRow:
    """One cluster as ``shards`` shows it."""

    name: str
    url: str  # credentials masked
    partitions: int | None  # how many it holds (None: not sharded)
    partition_ids: list[int] | None  # which
    executions: dict[str, int]  # by status
    outbox: int = 0  # news for other clusters not relayed yet


@click.command()
@click.option(
    "--partitions",
    type=click.IntRange(1, 1 << 16),
    help="Create the deployment with this many partitions (the first to open it decides; "
    f"default {DEFAULT_PARTITIONS}); refused if it exists with another number.",
)
@connection_options
@json_option
def shards(partitions: int | None, conn: Connection, as_json: bool) -> None:
    """Show a sharded deployment: its partitions, its catalog's epoch, and for each
    cluster its name, its URL (credentials masked), the partitions it holds and its
    executions by status. Given one cluster's URL, what that cluster is. With
    ``--partitions``, create a new deployment (its clusters empty) with that many.

    \b
    Example:
      raftflow shards --url 'http://a1:4001,a2:4001;http://b1:4001,b2:4001'
    """
    if partitions is not None:
        options = cast(ConnectOptions, conn.options())
        open_shards(conn.require_url(), MAX_PAYLOAD_BYTES, None, options, partitions).close()
    engine = conn.engine()
    try:
        deployment = engine.shards
        urls = [masked(str(url)) for url in shard_urls(conn.require_url())]
        counts = inspector_of(engine).each(lambda one: one.counts())
        backlogs = gather(deployment, lambda shard: shard.store.run(outbox.backlog())[0])
        store = deployment.shards[0].store  # one cluster: a deployment's, or none's?
        identity = None if deployment.sharded else store.run(catalogs.identity(store.clock))
    finally:
        engine.close()
    catalog = deployment.catalog
    rows = [
        ClusterRow(
            name=shard.name or (identity.name if identity else ""),
            url=url,
            partitions=len(catalog.partitions_of(shard.name)) if catalog else None,
            partition_ids=catalog.partitions_of(shard.name) if catalog else None,
            executions={status.value: n for status, n in count.items()},
            outbox=backlog,
        )
        for shard, url, (_name, count), (_shard, backlog) in zip(deployment, urls, counts, backlogs)
    ]
    if as_json:
        print_json(
            {
                "sharded": catalog is not None,
                "partitions": catalog.partitions if catalog else None,
                "epoch": catalog.epoch if catalog else None,
                "catalog": rows[0].name if catalog else identity.catalog if identity else None,
                "clusters": rows,
            }
        )
        return
    if catalog is not None:
        click.echo(
            f"a sharded deployment: {len(rows)} clusters, {catalog.partitions} partitions, "
            f"catalog epoch {catalog.epoch} (on {rows[0].name})"
        )
    elif identity is not None:
        click.echo(
            f"this cluster is {identity.name!r} of a sharded deployment whose catalog is on "
            f"{identity.catalog!r}: give the deployment's URL (its clusters, ';'-separated, "
            "the catalog's first) to see all of it"
        )
    else:
        click.echo("one cluster, not sharded")
    statuses = [status.value for status in Status if status is not Status.CONTINUED]
    lines = [
        [
            row.name or "-",
            row.url,
            "-" if row.partitions is None else row.partitions,
            *(row.executions[status] for status in statuses),
            row.outbox,
        ]
        for row in rows
    ]
    headers = ["CLUSTER", "URL", "PARTITIONS", *(status.upper() for status in statuses), "OUTBOX"]
    click.echo(table(lines, headers))


@click.command(name="move-partitions")
@click.option(
    "--partition", "partitions", type=int, multiple=True, help="A partition to move (repeat)."
)
@click.option("--from", "source", metavar="CLUSTER", help="Every partition of this cluster.")
@click.option("--to", "target", metavar="CLUSTER", required=True, help="The cluster to move to.")
@connection_options
@json_option
def move_partitions_command(
    partitions: tuple[int, ...], source: str | None, target: str, conn: Connection, as_json: bool
) -> None:
    """Move partitions of a sharded deployment to another cluster: copy what they hold,
    point the catalog there (epoch + 1), delete it where it was. Stop the deployment's
    workers first (a move refuses executions a worker holds); run it again after a
    failure; then start the workers on the URL that lists the new cluster.

    \b
    Example: shard-1's partitions to a new, empty cluster (listed last):
      raftflow move-partitions --from shard-1 --to shard-3 \\
        --url 'http://a1:4001;http://b1:4001;http://c1:4001'
    """
    from raftflow.engine.shards.move import move_partitions

    engine = conn.engine()
    try:
        deployment = engine.shards
        chosen = set(partitions)
        if source is not None and deployment.catalog is not None:
            chosen |= set(deployment.catalog.partitions_of(source))
        report = move_partitions(deployment, chosen, target)
    finally:
        engine.close()
    if as_json:
        print_json(report)
        return
    moved = ", ".join(f"{n} from {name}" for name, n in report.groups.items()) or "none"
    click.echo(
        f"{len(report.partitions)} partitions now on {report.to} (catalog epoch "
        f"{report.epoch}): queue groups copied {moved}, {report.rows} rows"
    )


COMMANDS = [migrate, shards, move_partitions_command]
