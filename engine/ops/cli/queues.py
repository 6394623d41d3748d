"""``raftflow queue``: what waits and what runs, per lane and priority (of every cluster of
a sharded deployment summed, ``--per-cluster`` each cluster's too)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.output import json_option, print_json, table, to_jsonable
from raftflow.engine.ops.scatter import (
    DeploymentLane,
    inspector_of,
    merge_lanes,
    merge_queues,
)
from raftflow.engine.ops.timefmt import format_duration
from raftflow.engine.workflow.queues import lane_parts
from raftflow.stores.inspect import Inspector, QueueSnapshot
from raftflow.stores.lanes import LaneDepth


@click.command()
@click.option(
    "--per-cluster",
    is_flag=True,
    help="Sharded: each cluster's queue after the deployment's (--json: under 'clusters').",
)
@connection_options
@json_option
def queue(per_cluster: bool, conn: Connection, as_json: bool) -> None:
    """Show the queue: per named queue and workflow, what waits, what runs, how long the
    oldest claimable execution has waited and how many live workers serve it (none: its
    executions wait until one starts); depth per priority, parked events (sleeps, waits,
    back-offs), the executions waiting for a slot of a concurrency limit (per limit key)
    and the leases each worker holds. Sharded: every cluster's, summed (a lane's workers
    counted once; the clusters where no live worker serves it named).

    \b
    Example:
      raftflow queue --url http://127.0.0.1:4001
    """
    engine = conn.engine()
    try:
        inspector = inspector_of(engine)
        found = inspector.each(_read)
    finally:
        engine.close()
    sharded = inspector.sharded
    snapshot = merge_queues([snapshot for _name, (snapshot, _lanes) in found])
    lanes = merge_lanes([(name, lanes) for name, (_snapshot, lanes) in found], sharded)
    clusters = [(name, snapshot, lanes) for name, (snapshot, lanes) in found]
    if as_json:
        data = _as_json(snapshot, lanes)
        if per_cluster and sharded:
            data["clusters"] = [
                {"cluster": name, **_as_json(one, merge_lanes([(name, depths)], False))}
                for name, one, depths in clusters
            ]
        print_json(data)
        return
    _print(snapshot, lanes)
    if per_cluster and sharded:
        for name, one, depths in clusters:
            click.echo(f"\n== cluster {name}\n")
            _print(one, merge_lanes([(name, depths)], False))


def _read(inspector: Inspector) -> tuple[QueueSnapshot, list[LaneDepth]]:
    return inspector.queue(), inspector.lanes()


def _as_json(snapshot: QueueSnapshot, lanes: Sequence[DeploymentLane]) -> dict[str, Any]:
    return {
        "queues": [{**_named_dict(d.lane), **_fields(d)} for d in lanes],
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


def _fields(lane: DeploymentLane) -> dict[str, Any]:
    data = to_jsonable(lane)
    if not lane.unserved_on:
        data.pop("unserved_on")
    return dict(data)


def _print(snapshot: QueueSnapshot, lanes: Sequence[DeploymentLane]) -> None:
    if lanes:
        lane_rows = [
            [
                *_named(d.lane),
                d.groups,
                d.ready,
                d.leased,
                format_duration(d.oldest_ready_age),
                _workers(d),
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


def _workers(lane: DeploymentLane) -> str:
    """Who serves a lane: how many live workers, and where none does (sharded)."""
    if not lane.workers:
        return "none: waits for one"
    if lane.unserved_on:
        return f"{lane.workers} (none on {', '.join(lane.unserved_on)}: waits there)"
    return str(lane.workers)


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


COMMANDS = [queue]
