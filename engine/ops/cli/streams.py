"""``raftflow stream``: print an execution's durable stream, one JSON value a line."""

from __future__ import annotations

import json

import click
from raftflow.engine.ops.cli.connection import Connection, waiting_connection_options


@click.command()
@click.argument("execution_id", metavar="ID")
@click.argument("key")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing new values until the stream is closed or the execution ends.",
)
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    metavar="N",
    help="Start at the stream's value N (0: the first).",
)
@waiting_connection_options
def stream(execution_id: str, key: str, follow: bool, offset: int, conn: Connection) -> None:
    """Print the values execution ID wrote to its stream KEY (engine.write_stream), one
    JSON value a line, in order; without --follow, those written so far.

    \b
    Example:
      raftflow stream order-7 progress --follow --url http://127.0.0.1:4001
    """
    engine = conn.engine()
    try:
        for value in engine.read_stream(execution_id, key, offset=offset, follow=follow):
            click.echo(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    finally:
        engine.close()


COMMANDS = [stream]
