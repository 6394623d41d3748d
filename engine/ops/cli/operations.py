"""Commands on the running system: the workers and the schedules (the queue:
:mod:`.queues`), of every cluster of a sharded deployment."""

from __future__ import annotations

from typing import Any

import click
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.exits import CommandFailed, Exit
from raftflow.engine.ops.cli.output import json_option, print_json, table, to_jsonable
from raftflow.engine.ops.scatter import inspector_of
from raftflow.engine.ops.timefmt import format_duration
from raftflow.engine.workflow.schedule import SCHEDULE_PREFIX


@click.command()
@click.option(
    "--within",
    type=float,
    default=60.0,
    show_default=True,
    metavar="S",
    help="Workers whose last beat is at most S seconds old.",
)
@connection_options
@json_option
def workers(within: float, conn: Connection, as_json: bool) -> None:
    """List the workers seen in the last minute and their in-flight executions.

    Each worker writes a presence beat every 10 s; its in-flight executions are the
    leases it holds now. Sharded: each worker once, with the clusters it beats on (its
    slots are per cluster: SLOTS sums them).

    \b
    Example:
      raftflow workers --url http://127.0.0.1:4001 --json
    """
    engine = conn.engine()
    try:
        inspector = inspector_of(engine)
        seen = inspector.workers(within)
        now = inspector.now()
    finally:
        engine.close()
    if as_json:
        skipped = {"leases"} if inspector.sharded else {"leases", "clusters"}
        print_json(
            [
                {
                    **{k: v for k, v in vars_of(w).items() if k not in skipped},
                    "in_flight": [lease.execution_id for lease in w.leases],
                }
                for w in seen
            ]
        )
        return
    rows = [
        [
            w.worker_id,
            w.state,
            format_duration(now - w.seen_at) + " ago",
            format_duration(now - w.started_at),
            w.concurrency,
            w.steps,
            ", ".join(lease.execution_id for lease in w.leases) or "-",
            *([", ".join(w.clusters)] if inspector.sharded else []),
        ]
        for w in seen
    ]
    headers = ["WORKER", "STATE", "SEEN", "UP", "SLOTS", "STEPS", "IN FLIGHT"]
    click.echo(table(rows, headers + (["CLUSTERS"] if inspector.sharded else [])))


@click.command()
@click.option(
    "--next",
    "count",
    type=click.IntRange(1, 100),
    default=3,
    show_default=True,
    metavar="N",
    help="How many of each schedule's next fire times to show.",
)
@click.option(
    "--remove",
    metavar="WORKFLOW",
    help="Delete that workflow's schedule (workers that still register it make it again).",
)
@connection_options
@json_option
def schedules(count: int, remove: str | None, conn: Connection, as_json: bool) -> None:
    """List the cron schedules (@engine.scheduled) with their next fire times, whether a
    worker is firing one now, and the last execution each started (sharded: every
    cluster's, each schedule on the cluster of its workflow's name).

    \b
    Example:
      raftflow schedules --url http://127.0.0.1:4001 --next 5
    """
    engine = conn.engine()
    try:
        if remove is not None:
            if not engine.remove_schedule(remove):
                raise CommandFailed(f"no schedule for workflow {remove!r}", Exit.FAILED)
            click.echo(f"schedule of {remove} removed")
            return
        found = engine.list_schedules()
        shards = engine.shards
    finally:
        engine.close()
    clusters = {
        info.workflow: shards.of(SCHEDULE_PREFIX + info.workflow).name if shards.sharded else ""
        for info in found
    }
    if as_json:
        print_json([_schedule_json(info.as_dict(count), clusters[info.workflow]) for info in found])
        return
    rows = []
    for info in found:
        data = info.as_dict(count)
        rows.append(
            [
                info.workflow,
                info.cron,
                info.timezone,
                info.catch_up,
                "firing" if info.firing else "parked",
                info.workers or "none: unfired",
                info.last_execution or "-",
                ", ".join(data["next"]),
                *([clusters[info.workflow]] if shards.sharded else []),
            ]
        )
    headers = ["WORKFLOW", "CRON", "ZONE", "CATCH UP", "STATE", "WORKERS", "LAST STARTED", "NEXT"]
    headers += ["CLUSTER"] if shards.sharded else []
    click.echo(table(rows, headers) if rows else "no schedules")


def _schedule_json(data: dict[str, Any], cluster: str) -> dict[str, Any]:
    return {**data, "cluster": cluster} if cluster else data


def vars_of(value: object) -> dict[str, object]:
    data = to_jsonable(value)
    assert isinstance(data, dict)
    return data


COMMANDS = [workers, schedules]
