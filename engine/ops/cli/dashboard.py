"""The dashboard's commands: ``ui`` serves it, ``hash-password`` makes a ``--users`` entry's
password hash."""

from __future__ import annotations

import sys

import click
from click.core import ParameterSource
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.credentials import read_secret
from raftflow.engine.ops.cli.exits import CommandFailed, Exit


@click.command()
@click.option(
    "--bind",
    default="127.0.0.1:8080",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen. Anything but loopback needs a token or --users.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="Answer to this host name too (repeatable; any port unless it names one): "
    "a reverse proxy's, this machine's. By default only the bind address, localhost, "
    "127.0.0.1 and [::1] with the bound port; other names get 421 (DNS rebinding).",
)
@click.option(
    "--token-file",
    envvar="RAFTFLOW_UI_TOKEN_FILE",
    show_envvar=True,
    type=click.Path(dir_okay=False),
    help="Read the shared secret from this file (its first line): sign in with it, or "
    "send it as 'Authorization: Bearer'.",
)
@click.option(
    "--token",
    envvar="RAFTFLOW_UI_TOKEN",
    show_envvar=True,
    help="The shared secret itself. On the command line it shows in ps: prefer "
    "--token-file or the environment variable.",
)
@click.option(
    "--users",
    "users_file",
    type=click.Path(exists=True, dir_okay=False),
    help='JSON file [{"username", "password_hash", "role": "admin" or "viewer"}] '
    "(HTTP Basic or the sign-in page); make a password_hash with 'raftflow hash-password'.",
)
@click.option("--read-only", is_flag=True, help="No actions (for a query-only rqlite user).")
@click.option(
    "--tls-cert", type=click.Path(exists=True, dir_okay=False), help="Serve HTTPS: certificate."
)
@click.option(
    "--tls-key", type=click.Path(exists=True, dir_okay=False), help="Serve HTTPS: private key."
)
@click.option(
    "--secure-cookies",
    is_flag=True,
    help="Mark cookies Secure without --tls-cert: behind a reverse proxy that serves HTTPS.",
)
@connection_options
def ui(
    bind: str,
    allowed_hosts: tuple[str, ...],
    token_file: str | None,
    token: str | None,
    users_file: str | None,
    read_only: bool,
    tls_cert: str | None,
    tls_key: str | None,
    secure_cookies: bool,
    conn: Connection,
) -> None:
    """Serve the dashboard: executions (filters, live counts), one execution's timeline,
    the queue, the workers and the cron schedules; cancel and signal executions
    (confirmed, CSRF-protected).

    \b
    Example:
      raftflow ui --url http://127.0.0.1:4001 --bind 127.0.0.1:8080
      raftflow ui --url http://10.0.0.1:4001 --bind 0.0.0.0:8443 \\
        --token-file /run/secrets/ui-token --tls-cert ui.pem --tls-key ui.key \\
        --allowed-host dashboard.example.com
    """
    try:
        from raftflow.engine.ops.ui.server import Settings, serve
    except ImportError as exc:
        raise CommandFailed(
            f"the dashboard needs its extra: pip install 'raftflow[ui]' ({exc.name} is missing)",
            Exit.USAGE,
        ) from None
    if token_file is not None:
        if token is not None:
            raise click.UsageError("pass the token one way: --token-file or --token")
        token = read_secret(token_file, "--token-file")
    elif click.get_current_context().get_parameter_source("token") == ParameterSource.COMMANDLINE:
        click.echo(
            "warning: --token on the command line shows in ps and the shell's history: "
            "use --token-file or RAFTFLOW_UI_TOKEN",
            err=True,
        )
    try:
        settings = Settings.from_options(
            bind=bind,
            token=token,
            users_file=users_file,
            read_only=read_only,
            allowed_hosts=allowed_hosts,
            tls_cert=tls_cert,
            tls_key=tls_key,
            secure_cookies=secure_cookies,
        )
    except ValueError as exc:
        raise CommandFailed(str(exc), Exit.USAGE) from None
    engine = conn.engine()
    try:
        serve(engine, settings)
    finally:
        engine.close()


@click.command(name="hash-password")
def hash_password() -> None:
    """Print a salted scrypt hash of a password, for a --users file's "password_hash".

    The password is read from standard input (its first line) when that is not a
    terminal, else asked for twice; it is never an argument (ps would show it).

    \b
    Example:
      raftflow hash-password < /run/secrets/alice
      [{"username": "alice", "password_hash": "scrypt$16384$8$1$...", "role": "admin"}]
    """
    from raftflow.engine.ops.ui.users import hash_password as scrypt_hash

    if sys.stdin.isatty():
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    else:
        lines = sys.stdin.read().splitlines()
        password = lines[0] if lines else ""
    if not password:
        raise CommandFailed("an empty password", Exit.USAGE)
    click.echo(scrypt_hash(password))


COMMANDS = [ui, hash_password]
