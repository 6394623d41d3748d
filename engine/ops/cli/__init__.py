"""The ``raftflow`` command (click): ``raftflow --help`` lists the commands, each
``--help`` has an example. Commands: :mod:`.executions` (start, result, cancel, send),
:mod:`.inspection` (get, steps, list), :mod:`.recovery` (resume, fork), :mod:`.queues`
(queue), :mod:`.operations` (workers, schedules), :mod:`.dashboard` (ui, hash-password),
:mod:`.admin` (worker, demo, cluster, install-rqlite), :mod:`.clusters` (migrate, shards).
What they share: :mod:`.connection` (the connection options), :mod:`.apps` (loading
``--app``), :mod:`.output` (tables, ``--json``, progress), :mod:`.rows` (executions and
calls as rows), :mod:`.times` and :mod:`.exits` (exit codes). On a sharded deployment the
listings read every cluster and merge (:mod:`raftflow.engine.ops.scatter`)."""

from raftflow.engine.ops.cli.apps import load_engine
from raftflow.engine.ops.cli.exits import Exit
from raftflow.engine.ops.cli.main import cli, main

__all__ = ["Exit", "cli", "load_engine", "main"]
