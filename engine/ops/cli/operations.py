"""Commands on the running system: the queue, the workers, the schedules."""

from __future__ import annotations

import click
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.exits import CommandFailed, Exit
from raftflow.engine.ops.cli.output import json_option, print_json, table, to_jsonable
from raftflow.engine.ops.timefmt import format_duration
from raftflow.engine.workflow.queues import lane_parts
from raftflow.stores.inspect import Inspector


@click.command()
@connection_options
@json_option
def queue(conn: Connection, as_json: bool) -> None:
    """Show the queue: per named queue and workflow, what waits, what runs, how long the
    oldest claimable execution has waited and how many live workers serve it (none: its
    executions wait until one starts); depth per priority, parked events (sleeps, waits,
    back-offs), the executions waiting for a slot of a concurrency limit (per limit key)
    and the leases each worker holds.

    \b
    Example:
      raftflow queue --url http://127.0.0.1:4001
    """
    engine = conn.engine()
    try:
        inspector = Inspector(engine.store.database)
        snapshot, lanes = inspector.queue(), inspector.lanes()
    finally:
        engine.close()
    if as_json:
        data = {
            "queues": [{**_named_dict(d.lane), **vars_of(d)} for d in lanes],
            "priorities": snapshot.priorities,
            "ready": snapshot.ready,
            "parked": snapshot.parked,
            "schedules": snapshot.schedules,
            "waiting_on_limits": snapshot.waiting_on_limits,
            "limits": [
                {
                    "limit_key": w.limit_key,
                    "workflow": w.workflow,
                    "limit": w.limit,
                    "holding": w.holding,
                    "waiting": w.waiting,
                    "next": w.next_id,
                    "next_waited": max(0.0, snapshot.now - w.next_since),
                }
                for w in snapshot.waiting
            ],
            "leases": len(snapshot.leases),
            "leases_by_worker": {
                worker: [lease.execution_id for lease in leases]
                for worker, leases in snapshot.leases_by_worker().items()
            },
        }
        print_json(data)
        return
    if lanes:
        lane_rows = [
            [
                *_named(d.lane),
                d.groups,
                d.ready,
                d.leased,
                format_duration(d.oldest_ready_age),
                d.workers or "none: waits for one",
            ]
            for d in lanes
        ]
        headers = ["QUEUE", "WORKFLOW", "VERSION", "QUEUED", "READY", "RUNNING", "OLDEST"]
        headers.append("WORKERS")
        click.echo(table(lane_rows, headers) + "\n")
    rows = [
        [p.priority, p.groups, p.ready, format_duration(p.oldest_ready_age)]
        for p in snapshot.priorities
    ]
    click.echo(table(rows, ["PRIORITY", "QUEUED", "READY", "OLDEST READY"]))
    click.echo(f"\nparked (waiting for a deadline, a signal or a child): {snapshot.parked}")
    click.echo(f"cron schedules parked until their next time: {snapshot.schedules}")
    click.echo(f"waiting on a concurrency limit: {snapshot.waiting_on_limits}")
    if snapshot.waiting:
        limit_rows = [
            [
                w.limit_key,
                f"{w.holding}/{w.limit}",
                w.waiting,
                w.next_id,
                format_duration(max(0.0, snapshot.now - w.next_since)),
            ]
            for w in snapshot.waiting
        ]
        click.echo(table(limit_rows, ["LIMIT KEY", "HELD", "WAITING", "NEXT", "WAITED"]))
    by_worker = snapshot.leases_by_worker()
    if by_worker:
        lease_rows = [
            [
                worker,
                len(leases),
                format_duration(min(lease.expiry for lease in leases) - snapshot.now),
            ]
            for worker, leases in by_worker.items()
        ]
        click.echo("\n" + table(lease_rows, ["WORKER", "LEASES", "FIRST EXPIRY IN"]))
    else:
        click.echo("no leases held")


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
    leases it holds now.

    \b
    Example:
      raftflow workers --url http://127.0.0.1:4001 --json
    """
    engine = conn.engine()
    try:
        inspector = Inspector(engine.store.database)
        seen = inspector.workers(within)
        now = inspector.now()
    finally:
        engine.close()
    if as_json:
        print_json(
            [
                {
                    **{k: v for k, v in vars_of(w).items() if k != "leases"},
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
        ]
        for w in seen
    ]
    click.echo(table(rows, ["WORKER", "STATE", "SEEN", "UP", "SLOTS", "STEPS", "IN FLIGHT"]))


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
    worker is firing one now, and the last execution each started.

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
    finally:
        engine.close()
    if as_json:
        print_json([info.as_dict(count) for info in found])
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
            ]
        )
    click.echo(
        table(
            rows,
            ["WORKFLOW", "CRON", "ZONE", "CATCH UP", "STATE", "WORKERS", "LAST STARTED", "NEXT"],
        )
        if rows
        else "no schedules"
    )


def _named(lane: str) -> tuple[str, str, str]:
    """A lane's queue, workflow and version as the tables show them."""
    parts = lane_parts(lane)
    if parts is None:
        return "-", "(any worker: unrouted)", "-"
    queue, workflow, version = parts
    return queue, workflow, version or "(schedule)"


def _named_dict(lane: str) -> dict[str, str | None]:
    queue, workflow, version = lane_parts(lane) or (None, None, None)
    return {"queue": queue, "workflow": workflow, "version": version}


def vars_of(value: object) -> dict[str, object]:
    data = to_jsonable(value)
    assert isinstance(data, dict)
    return data


COMMANDS = [queue, workers, schedules]
