"""The ``raftflow`` command: workers, the demo, a local rqlite cluster, the rqlite binary.

Environment variables are read here, at the edge, and nowhere else: ``RAFTFLOW_URL`` is
the default ``--url``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from raftflow.engine.app import Engine
from raftflow.engine.errors import ConfigurationError, RaftflowError


def load_engine(spec: str) -> Engine:
    """``module:attribute`` (``raftflow.engine.demo:engine``) to the Engine it names."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"expected module:attribute, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    engine = getattr(module, attribute, None)
    if not isinstance(engine, Engine):
        raise ConfigurationError(f"{spec} is not an Engine (found {type(engine).__name__})")
    return engine


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # httpx logs every request at INFO; that is noise for a worker.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)


def cmd_worker(args: argparse.Namespace) -> int:
    _configure_logging(args.verbose)
    engine = load_engine(args.app)
    if args.url:
        engine.connect(args.url, **_rqlite_options(args))
    engine.run_worker(
        concurrency=args.concurrency,
        worker_id=args.worker_id,
        min_priority=args.min_priority,
        visibility=args.visibility,
    )
    return 0


def _rqlite_options(args: argparse.Namespace) -> dict[str, Any]:
    """Client options for an rqlite URL (a sqlite URL takes none)."""
    if not args.url or args.url.startswith("sqlite:"):
        return {}
    options: dict[str, Any] = {}
    if args.timeout is not None:
        options["timeout"] = args.timeout
    if args.retry_timeout is not None:
        options["retry_timeout"] = args.retry_timeout
    if args.ca_file:
        options["verify"] = args.ca_file
    elif args.insecure:
        options["verify"] = False
    return options


def cmd_executions(args: argparse.Namespace) -> int:
    engine = load_engine(args.app)
    if args.url:
        engine.connect(args.url, **_rqlite_options(args))
    for record in engine.list(status=args.status, limit=args.limit):
        print(
            f"{record.id}  {record.workflow:<24} {record.status.value:<10} "
            f"steps={record.steps_done}"
        )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    from raftflow.transports import schema
    from raftflow.transports.database import open_database

    if not args.url:
        raise ConfigurationError("migrate needs --url (or RAFTFLOW_URL)")
    database = open_database(args.url, **_rqlite_options(args))
    try:
        state = database.run(schema.read_state())
        described = "empty" if state.empty else f"version {state.version}"
        print(f"database schema: {described}; this raftflow runs version {schema.LATEST}")
        target = schema.LATEST if args.to is None else args.to
        pending = schema.MIGRATIONS[state.version : target]
        if args.dry_run:
            for migration in pending:
                print(f"-- migration {migration.version}: {migration.name}")
                print(migration.sql())
            print(f"dry run: {len(pending)} migration(s) would be applied" if pending else "")
            return 0
        applied = database.run(schema.migrate(target, state=state))
        for migration in applied:
            print(f"applied migration {migration.version}: {migration.name}")
        final = database.run(schema.read_state())
        skipped = len(pending) - len(applied)
        others = f" ({skipped} applied by another migrator)" if skipped else ""
        print(f"database schema: version {final.version}{others}")
    finally:
        database.close()
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from raftflow.engine import demo

    if args.cluster:
        return _demo_on_cluster(args.executions, args.workers)
    url = args.url or os.environ.get("RAFTFLOW_URL")
    with tempfile.TemporaryDirectory(prefix="raftflow-demo-") as folder:
        url = url or f"sqlite:///{os.path.join(folder, 'demo.db')}"
        print(f"raftflow demo: {args.executions} checkouts on {url}")
        demo.engine.connect(url)
        with demo.engine.running_worker(concurrency=4):
            demo.run(args.executions)
        demo.engine.close()
    return 0


def _demo_on_cluster(executions: int, workers: int) -> int:
    from raftflow.engine import demo
    from raftflow.transports.rqlite.local import LocalCluster

    print(f"raftflow demo: starting a local 3-node rqlite cluster and {workers} workers")
    with LocalCluster(3) as cluster:
        hosts = [url.split("://", 1)[1] for url in cluster.urls]
        processes = []
        try:
            for i in range(workers):
                # Each worker enters the cluster through a different node.
                order = hosts[i % len(hosts) :] + hosts[: i % len(hosts)]
                processes.append(
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "raftflow.engine.cli",
                            "worker",
                            "raftflow.engine.demo:engine",
                            "--url",
                            "http://" + ",".join(order),
                            "--concurrency",
                            "4",
                        ],
                    )
                )
            demo.engine.connect("http://" + ",".join(hosts))
            print(f"nodes: {', '.join(cluster.urls)}; leader: {cluster.leader().url}")
            demo.run(executions)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
            demo.engine.close()
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from raftflow.transports.rqlite.local import cli as cluster

    argv = ["--nodes", str(args.nodes)]
    if args.base_dir:
        argv += ["--base-dir", args.base_dir]
    return int(cluster.main(argv) or 0)


def cmd_install_rqlite(args: argparse.Namespace) -> int:
    from raftflow.transports.rqlite.local import install_rqlite

    path = install_rqlite(args.dest)
    print(path)
    return 0


def _connection_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that connects: where, and how (rqlite URLs only)."""
    parser.add_argument(
        "--url",
        default=os.environ.get("RAFTFLOW_URL"),
        help="backend URL (http://host:4001[,host:4003] or sqlite:///file.db); "
        "default $RAFTFLOW_URL",
    )
    parser.add_argument("--timeout", type=float, help="seconds for one HTTP attempt (10)")
    parser.add_argument(
        "--retry-timeout", type=float, help="seconds of retries across nodes for one request (15)"
    )
    parser.add_argument("--ca-file", help="CA bundle to verify rqlite's HTTPS certificate")
    parser.add_argument(
        "--insecure", action="store_true", help="do not verify rqlite's HTTPS certificate"
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("raftflow")
    except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="raftflow", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"raftflow {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    worker = commands.add_parser("worker", help="run a worker for an app's engine")
    worker.add_argument("app", help="module:attribute of the Engine, e.g. myapp:engine")
    worker.add_argument("--concurrency", type=int, default=4)
    worker.add_argument("--worker-id")
    worker.add_argument("--min-priority", type=int, default=0)
    worker.add_argument("--visibility", type=float, default=30.0)
    _connection_options(worker)
    worker.add_argument("-v", "--verbose", action="store_true")
    worker.set_defaults(run=cmd_worker)

    executions = commands.add_parser("executions", help="list an app's executions")
    executions.add_argument("app")
    _connection_options(executions)
    executions.add_argument("--status")
    executions.add_argument("--limit", type=int, default=50)
    executions.set_defaults(run=cmd_executions)

    migrate = commands.add_parser(
        "migrate",
        help="apply pending schema migrations (each one transaction: all or nothing)",
        description="Bring the database's schema to this raftflow's version. Safe to run "
        "from several places at once: each migration is applied exactly once.",
    )
    _connection_options(migrate)
    migrate.add_argument("--dry-run", action="store_true", help="print the SQL, apply nothing")
    migrate.add_argument("--to", type=int, help="stop at this version (default: the latest)")
    migrate.set_defaults(run=cmd_migrate)

    demo = commands.add_parser("demo", help="run the checkout demo")
    demo.add_argument("--url", help="backend URL (default: a temporary SQLite file)")
    demo.add_argument(
        "--cluster",
        action="store_true",
        help="run on a local 3-node rqlite cluster with worker processes",
    )
    demo.add_argument("--executions", type=int, default=10)
    demo.add_argument("--workers", type=int, default=2)
    demo.set_defaults(run=cmd_demo)

    cluster = commands.add_parser("cluster", help="run a local rqlite cluster until Ctrl-C")
    cluster.add_argument("--nodes", type=int, default=3)
    cluster.add_argument("--base-dir")
    cluster.set_defaults(run=cmd_cluster)

    install = commands.add_parser("install-rqlite", help="install rqlited 8.26.8, print its path")
    install.add_argument(
        "--dest",
        help="install folder; binaries go to DEST/bin (default: $RAFTFLOW_RQLITE_DIR or "
        "~/.cache/raftflow/rqlite-8.26.8)",
    )
    install.set_defaults(run=cmd_install_rqlite)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except RaftflowError as exc:
        print(f"raftflow: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
