"""The ``raftflow`` command group and its entry point (exit codes: :class:`Exit`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
from raftflow.engine.ops.cli import (
    admin,
    clusters,
    dashboard,
    executions,
    inspection,
    operations,
    queues,
    recovery,
    replay,
    streams,
    versions,
)
from raftflow.engine.ops.cli.exits import EXIT_CODES_HELP, CommandFailed, Exit, exit_code_of

from raftflow.errors import RaftflowError


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("raftflow")
    except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
        return "unknown"


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES_HELP,
)
@click.version_option(_version(), "--version", prog_name="raftflow", message="%(prog)s %(version)s")
def cli() -> None:
    """raftflow: durable workflows on rqlite -- run workers, start, watch and steer
    executions, inspect the queue and the workers, serve the dashboard.

    Every command that connects takes --url (or RAFTFLOW_URL) and the connection
    options; those that print take --json.

    \b
    Example:
      export RAFTFLOW_URL=http://127.0.0.1:4001
      raftflow list --status running
    """


for command in (
    *executions.COMMANDS,
    *streams.COMMANDS,
    *inspection.COMMANDS,
    *recovery.COMMANDS,
    *replay.COMMANDS,
    *queues.COMMANDS,
    *operations.COMMANDS,
    *versions.COMMANDS,
    *dashboard.COMMANDS,
    *admin.COMMANDS,
    *clusters.COMMANDS,
):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; the exit code (see ``raftflow --help``)."""
    try:
        code = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="raftflow",
            standalone_mode=False,
        )
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.UsageError as exc:
        exc.show()
        return Exit.USAGE
    except click.ClickException as exc:
        exc.show()
        return int(exc.exit_code)
    except CommandFailed as exc:
        click.echo(f"raftflow: {exc}", err=True)
        return exc.code
    except click.Abort:
        click.echo("aborted", err=True)
        return 130
    except RaftflowError as exc:
        click.echo(f"raftflow: {type(exc).__name__}: {exc}", err=True)
        return exit_code_of(exc)
    except KeyboardInterrupt:
        return 130
    return code if isinstance(code, int) else Exit.OK


if __name__ == "__main__":
    sys.exit(main())
