"""Commands on the running system: the queue, the workers, the dashboard."""

from __future__ import annotations

import click
from raftflow.engine.ops.cli.common import (
    CommandFailed,
    Connection,
    Exit,
    connection_options,
    fmt_seconds,
    json_option,
    print_json,
    table,
)
from raftflow.stores.inspect import Inspector


@click.command()
@connection_options
@json_option
def queue(conn: Connection, as_json: bool) -> None:
    """Show the queue: depth per priority, how long the oldest claimable event has
    waited, parked events (sleeps, waits, back-offs), the executions waiting for a slot
    of a concurrency limit (per limit key) and the leases each worker holds.

    \b
    Example:
      raftflow queue --url http://127.0.0.1:4001
    """
    engine = conn.engine()
    try:
        snapshot = Inspector(engine.store.database).queue()
    finally:
        engine.close()
    if as_json:
        data = {
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
    rows = [
        [p.priority, p.groups, p.ready, fmt_seconds(p.oldest_ready_age)]
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
                fmt_seconds(max(0.0, snapshot.now - w.next_since)),
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
                fmt_seconds(min(lease.expiry for lease in leases) - snapshot.now),
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
            fmt_seconds(now - w.seen_at) + " ago",
            fmt_seconds(now - w.started_at),
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
                info.last_execution or "-",
                ", ".join(data["next"]),
            ]
        )
    click.echo(
        table(rows, ["WORKFLOW", "CRON", "ZONE", "CATCH UP", "STATE", "LAST STARTED", "NEXT"])
        if rows
        else "no schedules"
    )


def vars_of(value: object) -> dict[str, object]:
    from raftflow.engine.ops.cli.common import to_jsonable

    data = to_jsonable(value)
    assert isinstance(data, dict)
    return data


@click.command()
@click.option(
    "--bind",
    default="127.0.0.1:8080",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen. Anything but loopback needs --token or --users.",
)
@click.option(
    "--token",
    envvar="RAFTFLOW_UI_TOKEN",
    show_envvar=True,
    help="Shared secret: sign in with it (a cookie) or send it as 'Authorization: Bearer'.",
)
@click.option(
    "--users",
    "users_file",
    type=click.Path(exists=True, dir_okay=False),
    help='JSON file [{"username", "password" or "password_sha256", "role": '
    '"admin" or "viewer"}] (HTTP Basic auth).',
)
@click.option("--read-only", is_flag=True, help="No actions (for a query-only rqlite user).")
@connection_options
def ui(
    bind: str,
    token: str | None,
    users_file: str | None,
    read_only: bool,
    conn: Connection,
) -> None:
    """Serve the dashboard: executions (filters, live counts), one execution's timeline,
    the queue, the workers and the cron schedules; cancel and signal executions
    (confirmed, CSRF-protected).

    \b
    Example:
      raftflow ui --url http://127.0.0.1:4001 --bind 127.0.0.1:8080
      raftflow ui --url http://10.0.0.1:4001 --bind 0.0.0.0:8080 --token "$UI_TOKEN"
    """
    try:
        from raftflow.engine.ops.ui.server import Settings, serve
    except ImportError as exc:
        raise CommandFailed(
            f"the dashboard needs its extra: pip install 'raftflow[ui]' ({exc.name} is missing)",
            Exit.USAGE,
        ) from None
    try:
        settings = Settings.from_options(
            bind=bind, token=token, users_file=users_file, read_only=read_only
        )
    except ValueError as exc:
        raise CommandFailed(str(exc), Exit.USAGE) from None
    engine = conn.engine()
    try:
        serve(engine, settings)
    finally:
        engine.close()


COMMANDS = [queue, workers, schedules, ui]
