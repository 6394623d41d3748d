"""Commands that read executions: get, steps, list (and the hidden, deprecated
``executions``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.output import json_option, print_json, table, to_jsonable
from raftflow.engine.ops.cli.rows import (
    EXECUTION_HEADERS,
    STEP_HEADERS,
    error_line,
    execution_row,
    step_row,
)
from raftflow.engine.ops.cli.times import parse_since
from raftflow.engine.ops.scatter import DeploymentInspector, inspector_of
from raftflow.engine.ops.timefmt import format_duration, format_time
from raftflow.stores.inspect import ExecutionDetail
from raftflow.stores.records import ExecutionRecord, Status

STATUSES = click.Choice([s.value for s in Status])


def _detail(conn: Connection, execution_id: str) -> tuple[ExecutionDetail, str]:
    """Execution ID in full, read on its cluster, and that cluster's name (sharded)."""
    engine = conn.engine()
    try:
        inspector = inspector_of(engine)
        return inspector.detail(execution_id), inspector.cluster_of(execution_id)
    finally:
        engine.close()


def _summary(record: ExecutionRecord, cluster: str = "") -> dict[str, Any]:
    """An execution as JSON, its trace context left out (and its cluster, sharded)."""
    data = to_jsonable(record)
    data.pop("trace_context", None)
    if cluster:
        data["cluster"] = cluster
    return dict(data)


def _print_executions(
    records: Sequence[ExecutionRecord], now: float, as_json: bool, inspector: DeploymentInspector
) -> None:
    """The executions' rows, with the cluster of each when the deployment is sharded."""
    clusters = [inspector.cluster_of(r.id) for r in records]
    if as_json:
        print_json([_summary(r, cluster) for r, cluster in zip(records, clusters)])
    elif inspector.sharded:
        rows = [[*execution_row(r, now), c] for r, c in zip(records, clusters)]
        click.echo(table(rows, [*EXECUTION_HEADERS, "CLUSTER"]))
    else:
        click.echo(table([execution_row(r, now) for r in records], EXECUTION_HEADERS))


@click.command()
@click.argument("execution_id", metavar="ID")
@connection_options
@json_option
def get(execution_id: str, conn: Connection, as_json: bool) -> None:
    """Show execution ID: status, input, output or error, who holds it.

    \b
    Example:
      raftflow get order-7 --url http://127.0.0.1:4001 --json
    """
    detail, cluster = _detail(conn, execution_id)
    record = detail.execution
    if as_json:
        data = _summary(record, cluster)
        data["queued"] = to_jsonable(detail.queued)
        data["signals"] = len(detail.signals)
        data["children"] = [child.id for child in detail.children]
        print_json(data)
        return
    lines = [
        ("id", record.id),
        ("workflow", record.workflow),
        ("status", record.status.value),
        ("cancel asked", record.cancel_reason or "-"),
        ("priority", record.priority),
        ("created", format_time(record.created_at)),
        ("updated", format_time(record.updated_at)),
        ("completed", format_time(record.completed_at)),
        ("steps done", record.steps_done),
        ("parent", record.parent_id or "-"),
        ("children", ", ".join(c.id for c in detail.children) or "-"),
        ("input", json.dumps(record.input)),
    ]
    if cluster:
        lines.insert(3, ("cluster", cluster))
    if record.status is Status.SUCCEEDED:
        lines.append(("output", json.dumps(record.output)))
    if record.error is not None:
        lines.append(("error", error_line(record.error)))
    for event in detail.queued:
        if event.holder is not None:
            state = (
                f"leased by {event.holder} for {format_duration((event.expiry or 0) - detail.now)}"
            )
        elif event.parked:
            state = f"parked, due in {format_duration(max(0.0, (event.expiry or 0) - detail.now))}"
        else:
            state = "waiting for a worker"
        lines.append(("queued event", f"#{event.seq} {state}"))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        click.echo(f"{key.ljust(width)}  {value}")


@click.command()
@click.argument("execution_id", metavar="ID")
@connection_options
@json_option
def steps(execution_id: str, conn: Connection, as_json: bool) -> None:
    """List the recorded calls of execution ID (steps, sleeps, recvs...) in order.

    \b
    Example:
      raftflow steps order-7 --url http://127.0.0.1:4001
    """
    detail, _cluster = _detail(conn, execution_id)
    if as_json:
        print_json(detail.steps)
    else:
        live = not detail.execution.status.is_final
        rows = [step_row(s, detail.now, live) for s in detail.steps]
        click.echo(table(rows, STEP_HEADERS))


@click.command(name="list")
@click.option("--status", type=STATUSES, help="Only executions with this status.")
@click.option("--workflow", help="Only executions of this workflow.")
@click.option("--since", metavar="WHEN", help="Created since: 15m, 2h, 7d, an ISO date, epoch s.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@connection_options
@json_option
def list_(
    status: str | None,
    workflow: str | None,
    since: str | None,
    limit: int,
    conn: Connection,
    as_json: bool,
) -> None:
    """List executions, newest first (of every cluster of a sharded deployment, with
    the cluster of each).

    \b
    Example:
      raftflow list --status failed --workflow checkout --since 2h --url http://127.0.0.1:4001
    """
    since_ts = parse_since(since)
    engine = conn.engine()
    try:
        inspector = inspector_of(engine)
        records = inspector.list(status=status, workflow=workflow, since=since_ts, limit=limit)
        now = inspector.now()
    finally:
        engine.close()
    _print_executions(records, now, as_json, inspector)


@click.command(name="executions", hidden=True)
@click.argument("app", required=False)
@click.option("--status", type=STATUSES)
@click.option("--limit", type=click.IntRange(1, 10_000), default=50)
@connection_options
@json_option
def executions(
    app: str | None, status: str | None, limit: int, conn: Connection, as_json: bool
) -> None:
    """Deprecated: `raftflow list` (APP is ignored)."""
    engine = conn.engine()
    try:
        records = engine.list(status=status, limit=limit)
        inspector = inspector_of(engine)
        now = inspector.now()
    finally:
        engine.close()
    _print_executions(records, now, as_json, inspector)


COMMANDS = [get, steps, list_, executions]
