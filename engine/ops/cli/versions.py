"""``raftflow versions``: the application versions with executions in flight and the live
workers of each -- what a rolling deploy watches drain -- and ``promote``, which moves an
old version's unfinished executions to a new one (engine/workflow/versions.py)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import click
from raftflow.engine.ops.cli.apps import load_engine
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.exits import CommandFailed, Exit
from raftflow.engine.ops.cli.output import json_option, print_json, table
from raftflow.engine.ops.scatter import gather
from raftflow.engine.workflow.queues import lane_parts
from raftflow.engine.workflow.versions import check_version
from raftflow.stores.lanes import LaneFlows

from raftflow.errors import InvalidArgumentError

#: The version shown for executions started by a release before versions.
UNVERSIONED = "(any)"


@dataclass
class VersionRow:
    version: str
    in_flight: int = 0
    workflows: set[str] = field(default_factory=set)
    workers: int = 0


def version_rows(
    in_flight: dict[str, int], workers: Sequence[Sequence[str] | None]
) -> list[VersionRow]:
    """Per version: its unfinished executions and their workflows, and its live workers (a
    worker of a release before versions, which claims every lane, counts for none)."""
    rows: dict[str, VersionRow] = defaultdict(lambda: VersionRow(""))
    for lane, count in in_flight.items():
        parts = lane_parts(lane)
        version = UNVERSIONED if parts is None or parts[2] is None else parts[2]
        row = rows[version]
        row.version, row.in_flight = version, row.in_flight + count
        if parts is not None:
            row.workflows.add(parts[1])
    for lanes in workers:
        versions = {p[2] for p in map(lane_parts, lanes or ()) if p is not None and p[2]}
        for version in versions:
            rows[version].version = version
            rows[version].workers += 1
    return sorted(rows.values(), key=lambda r: (-r.workers, r.version))


@click.group(invoke_without_command=True)
@connection_options
@json_option
@click.pass_context
def versions(ctx: click.Context, conn: Connection, as_json: bool) -> None:
    """List the application versions: executions in flight (pending or running, waits
    included) and live workers of each (sharded: of every cluster, each worker once). In
    a rolling deploy, stop the old version's workers once its executions in flight reach
    0 -- or move them on with `promote`.

    \b
    Example:
      raftflow versions --url http://127.0.0.1:4001
    """
    if ctx.invoked_subcommand is not None:
        return
    engine = conn.engine()
    try:
        found = gather(
            engine.shards, lambda shard: shard.store.run(LaneFlows(shard.store.clock).in_flight())
        )
    finally:
        engine.close()
    in_flight: Counter[str] = Counter()
    workers: dict[str, Sequence[str] | None] = {}  # by id: a worker of several clusters once
    for _shard, (counts, lanes) in found:
        in_flight.update(counts)
        workers.update(lanes)
    rows = version_rows(in_flight, list(workers.values()))
    if as_json:
        print_json(
            [
                {
                    "version": r.version,
                    "in_flight": r.in_flight,
                    "workflows": sorted(r.workflows),
                    "workers": r.workers,
                }
                for r in rows
            ]
        )
        return
    lines = [
        [r.version, r.in_flight, r.workers or "none", ", ".join(sorted(r.workflows)) or "-"]
        for r in rows
    ]
    headers = ["VERSION", "IN FLIGHT", "WORKERS", "WORKFLOWS"]
    click.echo(table(lines, headers) if lines else "no executions in flight, no workers")


@versions.command()
@click.argument("old", metavar="OLD")
@click.option("--to", "new", metavar="VERSION", help="The version to move them to.")
@click.option("--app", metavar="MODULE:ENGINE", help="Or: the version of this app's code.")
@connection_options
def promote(old: str, new: str | None, app: str | None, conn: Connection) -> None:
    """Move version OLD's unfinished executions to another version (on every cluster of
    a sharded deployment), whose workers then run them, replaying OLD's histories with
    their code: check them first (`raftflow replay --recent N --workflow W --app ...`).

    \b
    Example:
      raftflow versions promote 3f2a9c1d0b7e --app shop:engine --url http://127.0.0.1:4001
    """
    if (new is None) == (app is None):
        raise click.UsageError("give the version to move them to: --to VERSION or --app")
    try:
        old = check_version(old)
        target = check_version(new) if new is not None else load_engine(str(app)).version
    except InvalidArgumentError as exc:
        raise click.UsageError(str(exc)) from None
    if target == old:
        raise CommandFailed(f"version {old} is the target version already", Exit.USAGE)
    engine = conn.engine()
    try:
        found = gather(
            engine.shards,
            lambda shard: shard.store.run(LaneFlows(shard.store.clock).promote(old, target)),
        )
    finally:
        engine.close()
    moved = sum(count for _shard, count in found)
    where = f" (on {len(found)} clusters)" if len(found) > 1 else ""
    click.echo(f"{moved} executions moved from version {old} to {target}{where}")


COMMANDS = [versions]
