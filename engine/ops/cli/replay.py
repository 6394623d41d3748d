"""``raftflow replay``: recorded executions through the app's code of now, as a deploy gate
(exit 1 when one diverges). See :meth:`Engine.replay
<raftflow.engine.client.calls.ClientCalls.replay>`."""

from __future__ import annotations

from typing import Any

import click
from raftflow.engine.app import Engine
from raftflow.engine.client.replay import ReplayReport
from raftflow.engine.ops.cli.apps import app_option, load_engine
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.exits import CommandFailed, Exit
from raftflow.engine.ops.cli.output import json_option, print_json, to_jsonable
from raftflow.engine.ops.scatter import inspector_of
from raftflow.stores.flows import MAX_LIST_LIMIT
from raftflow.stores.records import ExecutionRecord, Status

from raftflow.errors import ExecutionNotFoundError, UnknownWorkflowError


@click.command()
@click.argument("execution_id", metavar="[ID]", required=False)
@app_option("The app whose code (the new version) replays the recorded histories.")
@click.option(
    "--recent",
    type=click.IntRange(1, MAX_LIST_LIMIT),
    metavar="N",
    help="Instead of ID: the N most recent executions of --workflow, finished or in flight.",
)
@click.option("--workflow", metavar="NAME", help="With --recent: the workflow's name.")
@connection_options
@json_option
def replay(
    execution_id: str | None,
    app: str,
    recent: int | None,
    workflow: str | None,
    conn: Connection,
    as_json: bool,
) -> None:
    """Replay execution ID's recorded history (or the --recent N of --workflow) through
    the app's code, with no side effect: recorded results are returned, no step runs,
    nothing is written. Prints the first call where the code no longer makes the recorded
    call; exit 1 if any execution diverges. An execution in flight is checked up to where
    its history ends. Run it in CI against a copy of production's database before a deploy.

    \b
    Example:
      raftflow replay order-7 --app myapp:engine --url sqlite:///prod-copy.db
      raftflow replay --recent 500 --workflow checkout --app myapp:engine
    """
    if (execution_id is None) == (recent is None):
        raise click.UsageError("give an execution ID or --recent N (not both)")
    if (recent is None) != (workflow is None):
        raise click.UsageError("--recent N and --workflow NAME go together")
    engine = conn.engine(load_engine(app))
    try:
        if execution_id is not None:
            reports = [_replay(engine, execution_id)]
        else:
            assert recent is not None and workflow is not None
            reports = [_replay(engine, record.id) for record in _recent(engine, workflow, recent)]
    finally:
        engine.close()
    diverged = sum(not report.consistent for report in reports)
    if as_json:
        rows = [{**to_jsonable(r), "consistent": r.consistent} for r in reports]
        print_json(rows[0] if execution_id is not None else {"reports": rows, "diverged": diverged})
    else:
        for report in reports:
            click.echo(str(report))
        if execution_id is None:
            click.echo(f"{len(reports)} executions replayed: {diverged} diverged")
    if diverged:
        raise click.exceptions.Exit(Exit.FAILED)


def _replay(engine: Engine, execution_id: str) -> ReplayReport:
    try:
        return engine.replay(execution_id)
    except (ExecutionNotFoundError, UnknownWorkflowError) as exc:  # not the code's fault
        raise CommandFailed(str(exc), Exit.USAGE) from None


def _recent(engine: Engine, workflow: str, count: int) -> list[ExecutionRecord]:
    """The ``count`` most recent executions of ``workflow``; the runs they ended with
    ``continue_as_new`` (ids ``<id>#<run>``) are not executions of their own."""
    try:
        engine.registry.workflow(workflow)
    except UnknownWorkflowError as exc:
        raise CommandFailed(str(exc), Exit.USAGE) from None
    inspector, limit = inspector_of(engine), count
    while True:
        found: list[Any] = inspector.list(workflow=workflow, limit=limit)
        executions = [r for r in found if r.status is not Status.CONTINUED][:count]
        if len(executions) == count or len(found) < limit or limit == MAX_LIST_LIMIT:
            return executions
        limit = min(limit * 2, MAX_LIST_LIMIT)


COMMANDS = [replay]
