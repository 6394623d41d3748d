"""Commands on executions: start, result, get, steps, list, cancel, send."""

from __future__ import annotations

import json
import time
from typing import Any

import click
from raftflow.engine.app import Engine
from raftflow.engine.ops.cli.apps import load_engine
from raftflow.engine.ops.cli.connection import (
    Connection,
    connection_options,
    waiting_connection_options,
)
from raftflow.engine.ops.cli.exits import CommandFailed, Exit
from raftflow.engine.ops.cli.output import (
    json_option,
    print_json,
    progress,
    table,
    to_jsonable,
)
from raftflow.engine.ops.cli.rows import (
    EXECUTION_HEADERS,
    STEP_HEADERS,
    error_line,
    execution_row,
    step_row,
)
from raftflow.engine.ops.cli.times import fmt_seconds, fmt_time, parse_since
from raftflow.stores.inspect import Inspector
from raftflow.stores.records import ExecutionRecord, Status

from raftflow.errors import ExecutionNotFoundError

STATUSES = click.Choice([s.value for s in Status])


def _json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=what) from None


@click.command()
@click.argument("workflow")
@click.argument("input_json", default="null", metavar="[INPUT_JSON]")
@click.option(
    "--app",
    envvar="RAFTFLOW_APP",
    show_envvar=True,
    required=True,
    metavar="MODULE:ENGINE",
    help="The app's Engine, whose registry validates the input (and sets the workflow's "
    "timeout) exactly as engine.start() does.",
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
    app: str,
    execution_id: str | None,
    priority: int,
    debounce: float | None,
    wait: bool,
    wait_timeout: float | None,
    conn: Connection,
    as_json: bool,
) -> None:
    """Start an execution of WORKFLOW with INPUT_JSON (a JSON value; default null).

    \b
    Example:
      raftflow start checkout '{"id": "order-7", "items": ["sku-1"], "amount": 12.5}' \\
          --app raftflow.engine.ops.demo:engine --id order-7 --url http://127.0.0.1:4001 --wait
    """
    value = _json_arg(input_json, "INPUT_JSON")
    engine = conn.engine(load_engine(app))
    try:
        handle = engine.start(
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
    engine: Engine, execution_id: str, timeout: float | None, as_json: bool
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


def _wait(engine: Engine, execution_id: str, timeout: float | None) -> ExecutionRecord:
    started = time.monotonic()
    delay = 0.02
    with progress() as bar:
        while True:
            record = engine.store.get(execution_id)
            if record is None:
                raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
            if record.status.is_final:
                return record
            waited = time.monotonic() - started
            bar.update(
                f"waiting for {execution_id}: {record.status.value}, "
                f"{record.steps_done} steps, {fmt_seconds(waited)}"
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
def get(execution_id: str, conn: Connection, as_json: bool) -> None:
    """Show execution ID: status, input, output or error, who holds it.

    \b
    Example:
      raftflow get order-7 --url http://127.0.0.1:4001 --json
    """
    engine = conn.engine()
    try:
        detail = Inspector(engine.store.database).detail(execution_id)
    finally:
        engine.close()
    record = detail.execution
    if as_json:
        data = to_jsonable(record)
        data.pop("trace_context", None)
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
        ("created", fmt_time(record.created_at)),
        ("updated", fmt_time(record.updated_at)),
        ("completed", fmt_time(record.completed_at)),
        ("steps done", record.steps_done),
        ("parent", record.parent_id or "-"),
        ("children", ", ".join(c.id for c in detail.children) or "-"),
        ("input", json.dumps(record.input)),
    ]
    if record.status is Status.SUCCEEDED:
        lines.append(("output", json.dumps(record.output)))
    if record.error is not None:
        lines.append(("error", error_line(record.error)))
    for event in detail.queued:
        if event.holder is not None:
            state = f"leased by {event.holder} for {fmt_seconds((event.expiry or 0) - detail.now)}"
        elif event.parked:
            state = f"parked, due in {fmt_seconds(max(0.0, (event.expiry or 0) - detail.now))}"
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
    engine = conn.engine()
    try:
        detail = Inspector(engine.store.database).detail(execution_id)
    finally:
        engine.close()
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
    """List executions, newest first.

    \b
    Example:
      raftflow list --status failed --workflow checkout --since 2h --url http://127.0.0.1:4001
    """
    since_ts = parse_since(since)
    engine = conn.engine()
    try:
        inspector = Inspector(engine.store.database)
        records = inspector.list(status=status, workflow=workflow, since=since_ts, limit=limit)
        now = inspector.now()
    finally:
        engine.close()
    if as_json:
        print_json([_summary(r) for r in records])
    else:
        click.echo(table([execution_row(r, now) for r in records], EXECUTION_HEADERS))


def _summary(record: ExecutionRecord) -> dict[str, Any]:
    data = to_jsonable(record)
    data.pop("trace_context", None)
    return dict(data)


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
        now = Inspector(engine.store.database).now()
    finally:
        engine.close()
    if as_json:
        print_json([_summary(r) for r in records])
    else:
        click.echo(table([execution_row(r, now) for r in records], EXECUTION_HEADERS))


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


COMMANDS = [start, result, get, steps, list_, cancel, send, executions]
