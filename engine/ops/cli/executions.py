"""Commands that run and steer executions: start, result, cancel, send."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

import click
from raftflow.engine.app import Engine
from raftflow.engine.client.client import Client
from raftflow.engine.client.face import ClientFace
from raftflow.engine.client.handle import WorkflowHandle
from raftflow.engine.ops.cli.apps import app_option, load_engine
from raftflow.engine.ops.cli.connection import (
    Connection,
    connection_options,
    waiting_connection_options,
)
from raftflow.engine.ops.cli.exits import CommandFailed, Exit
from raftflow.engine.ops.cli.output import json_option, print_json, progress, to_jsonable
from raftflow.engine.ops.cli.rows import error_line
from raftflow.engine.ops.timefmt import format_duration
from raftflow.engine.workflow.queues import DEFAULT_QUEUE
from raftflow.stores.records import ExecutionRecord, Status

from raftflow.errors import ExecutionNotFoundError


def _json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=what) from None


@click.command()
@click.argument("workflow")
@click.argument("input_json", default="null", metavar="[INPUT_JSON]")
@app_option(
    "The app's Engine, whose registry validates the input (and sets the workflow's "
    "timeout) exactly as engine.start() does. Without it, the workflow is started by "
    "name (raftflow.Client): on the version the running workers serve, with the "
    "timeout and limits they publish for it.",
    required=False,
)
@click.option(
    "--queue",
    help="Without --app: the workflow's queue (default: default). With --app, its code says.",
)
@click.option(
    "--concurrency-key",
    help="Without --app: the key of a workflow limited per concurrency_key (what its "
    "function returns for INPUT_JSON).",
)
@click.option(
    "--id", "execution_id", help="Execution id (idempotent: an existing one is returned)."
)
@click.option("--priority", type=click.IntRange(0, 4), default=0, show_default=True)
@click.option(
    "--debounce",
    type=float,
    metavar="S",
    help="With --id: run S seconds after the last start of that id; starts before it runs "
    "fold into it (the last input wins).",
)
@click.option("--wait", is_flag=True, help="Wait for the result (as `raftflow result`).")
@click.option(
    "--timeout",
    "wait_timeout",
    type=float,
    metavar="S",
    help="With --wait: give up after S seconds (exit 4).",
)
@waiting_connection_options
@json_option
def start(
    workflow: str,
    input_json: str,
    app: str | None,
    queue: str | None,
    concurrency_key: str | None,
    execution_id: str | None,
    priority: int,
    debounce: float | None,
    wait: bool,
    wait_timeout: float | None,
    conn: Connection,
    as_json: bool,
) -> None:
    """Start an execution of WORKFLOW with INPUT_JSON (a JSON value; default null).

    Without --app the workflow is started by name, on the version of the running workers
    that serve it (refused if running workers report their workflows and none serves it;
    left waiting, visibly, if none reports).

    \b
    Example:
      raftflow start checkout '{"id": "order-7", "items": ["sku-1"], "amount": 12.5}' \\
          --id order-7 --url http://127.0.0.1:4001 --wait
    """
    value = _json_arg(input_json, "INPUT_JSON")
    if app is not None and (queue is not None or concurrency_key is not None):
        raise click.UsageError(
            "--queue and --concurrency-key are for a start by name (without --app)"
        )
    start: Callable[..., WorkflowHandle[Any]]
    if app is None:
        client = Client.from_url(conn.require_url(), **conn.options())
        engine: Client | Engine = client
        start = functools.partial(
            client.start, queue=queue or DEFAULT_QUEUE, concurrency_key=concurrency_key
        )
    else:
        engine = conn.engine(load_engine(app))
        start = engine.start
    try:
        handle = start(
            workflow, value, execution_id=execution_id, priority=priority, debounce=debounce
        )
        if not wait:
            if as_json:
                print_json({"id": handle.id, "created": handle.created})
            else:
                click.echo(handle.id if handle.created else f"{handle.id} (already existed)")
            return
        _wait_and_print(engine, handle.id, wait_timeout, as_json)
    finally:
        engine.close()


@click.command()
@click.argument("execution_id", metavar="ID")
@click.option(
    "--timeout",
    "wait_timeout",
    type=float,
    metavar="S",
    help="Give up after S seconds (exit 4); default: wait for ever.",
)
@waiting_connection_options
@json_option
def result(execution_id: str, wait_timeout: float | None, conn: Connection, as_json: bool) -> None:
    """Wait for execution ID to finish and print its output (JSON).

    Exit 0 with the output if it succeeded, 1 with its error if it failed or was
    cancelled, 4 if still running after --timeout. On a terminal a status line shows
    the wait; piped, it is quiet.

    \b
    Example:
      raftflow result order-7 --timeout 60 --url http://127.0.0.1:4001
    """
    engine = conn.engine()
    try:
        _wait_and_print(engine, execution_id, wait_timeout, as_json)
    finally:
        engine.close()


def _wait_and_print(
    engine: ClientFace, execution_id: str, timeout: float | None, as_json: bool
) -> None:
    record = _wait(engine, execution_id, timeout)
    if as_json:
        print_json(
            {
                "id": record.id,
                "status": record.status.value,
                "output": record.output,
                "error": to_jsonable(record.error),
            }
        )
    elif record.status is Status.SUCCEEDED:
        click.echo(json.dumps(record.output, indent=2))
    if record.status is Status.SUCCEEDED:
        return
    if not as_json:
        error = record.error
        click.echo(f"execution {record.id} {record.status.value}: {error_line(error)}", err=True)
        if error is not None and error.traceback:
            click.echo(error.traceback.rstrip(), err=True)
    raise click.exceptions.Exit(Exit.FAILED)


def _wait(engine: ClientFace, execution_id: str, timeout: float | None) -> ExecutionRecord:
    started = time.monotonic()
    delay = 0.02
    with progress() as bar:
        while True:
            record = engine.store_of(execution_id).get(execution_id)
            if record is None:
                raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
            if record.status.is_final:
                return record
            waited = time.monotonic() - started
            bar.update(
                f"waiting for {execution_id}: {record.status.value}, "
                f"{record.steps_done} steps, {format_duration(waited)}"
            )
            if timeout is not None and waited >= timeout:
                raise CommandFailed(
                    f"execution {execution_id!r} is still {record.status.value} after {timeout:g}s",
                    Exit.TIMEOUT,
                )
            pause = delay if timeout is None else min(delay, max(0.0, timeout - waited))
            time.sleep(pause)
            delay = min(delay * 1.5, 0.5)


@click.command()
@click.argument("execution_id", metavar="ID")
@connection_options
@json_option
def cancel(execution_id: str, conn: Connection, as_json: bool) -> None:
    """Cancel execution ID: it stops at its next step boundary (a running step
    finishes), its children with it; one that no worker has started is cancelled at
    once. A finished execution is left as it is.

    \b
    Example:
      raftflow cancel order-7 --url http://127.0.0.1:4001
    """
    engine = conn.engine()
    try:
        before = engine.cancel(execution_id)
        now = before if before.is_final else engine.get(execution_id).status()
    finally:
        engine.close()
    if as_json:
        print_json(
            {
                "id": execution_id,
                "status": before.value,
                "cancelled": not before.is_final,
                "status_now": now.value,
            }
        )
    elif before.is_final:
        click.echo(f"{execution_id} is already {before.value}: nothing to cancel")
    elif now is Status.CANCELLED:
        click.echo(f"{execution_id}: cancelled (it was {before.value})")
    else:
        click.echo(f"{execution_id}: cancel requested (it was {before.value})")


@click.command()
@click.argument("execution_id", metavar="ID")
@click.argument("message")
@click.option("--topic", help="The recv() topic (default: the default topic).")
@click.option("--key", help="Idempotency key: a retried send with the same key adds nothing.")
@connection_options
@json_option
def send(
    execution_id: str,
    message: str,
    topic: str | None,
    key: str | None,
    conn: Connection,
    as_json: bool,
) -> None:
    """Send MESSAGE (JSON) to execution ID, for its engine.recv(topic).

    \b
    Example:
      raftflow send order-7 '{"by": "warehouse"}' --topic approval --url http://127.0.0.1:4001
    """
    value = _json_arg(message, "MESSAGE")
    engine = conn.engine()
    try:
        engine.send(execution_id, value, topic=topic, key=key)
    finally:
        engine.close()
    if as_json:
        print_json({"id": execution_id, "topic": topic, "sent": True})
    else:
        click.echo(f"sent to {execution_id}" + (f" on topic {topic!r}" if topic else ""))


COMMANDS = [start, result, cancel, send]
