"""``raftflow resume`` and ``raftflow fork``: run again what failed, once the fix is out."""

from __future__ import annotations

import click
from raftflow.engine.app import Engine
from raftflow.engine.ops.cli.apps import load_engine
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.output import json_option, print_json

#: ``--app``: the version to move the execution to (default: it keeps its own).
to_app_version = click.option(
    "--app",
    metavar="MODULE:ENGINE",
    help="Move it to this app's version, whose workers then run it (default: the version "
    "that started it). Check first: raftflow replay ID --app ...",
)


def _engine(conn: Connection, app: str | None) -> Engine:
    return conn.engine(None if app is None else load_engine(app))


@click.command()
@click.argument("execution_id", metavar="ID")
@to_app_version
@connection_options
@json_option
def resume(execution_id: str, app: str | None, conn: Connection, as_json: bool) -> None:
    """Run failed or cancelled execution ID again from its last recorded step, on the
    code deployed now (the step that failed runs again, a new round of its retries, its
    failed attempts kept). Any other status: nothing done.

    \b
    Example:
      raftflow resume order-7 --url http://127.0.0.1:4001
    """
    engine = _engine(conn, app)
    try:
        resumed = engine.resume(execution_id, to_current_version=app is not None)
    finally:
        engine.close()
    if as_json:
        print_json({"id": execution_id, "resumed": resumed})
    elif resumed:
        click.echo(f"{execution_id}: queued again from its last recorded step")
    else:
        click.echo(f"{execution_id} is neither failed nor cancelled: nothing to resume")


@click.command()
@click.argument("execution_id", metavar="ID")
@click.option(
    "--from-step",
    type=click.IntRange(min=0),
    required=True,
    help="The first call to run again (0 to the number of calls ID recorded); the calls "
    "before it reuse ID's records.",
)
@click.option("--id", "new_id", help="The new execution's id (default: a new uuid).")
@to_app_version
@connection_options
@json_option
def fork(
    execution_id: str,
    from_step: int,
    new_id: str | None,
    app: str | None,
    conn: Connection,
    as_json: bool,
) -> None:
    """Start a new execution of ID's workflow and input that reuses the records of its
    calls before --from-step (their functions are not called) and runs from there on the
    code deployed now.

    \b
    Example:
      raftflow fork order-7 --from-step 2 --id order-7-retry --url http://127.0.0.1:4001
    """
    engine = _engine(conn, app)
    try:
        handle = engine.fork(
            execution_id, from_step, new_execution_id=new_id, to_current_version=app is not None
        )
    finally:
        engine.close()
    if as_json:
        print_json({"id": handle.id, "source": execution_id, "from_step": from_step})
    else:
        click.echo(f"{handle.id}: forked from {execution_id} at call {from_step}")


COMMANDS = [resume, fork]
