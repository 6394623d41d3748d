"""The ``raftflow`` command (click): ``raftflow --help`` lists the commands, each
``--help`` has an example. Modules: :mod:`.common` (connection options, output, exit
codes), :mod:`.executions`, :mod:`.operations` (queue, workers, schedules),
:mod:`.dashboard` (ui, hash-password), :mod:`.admin` (worker, migrate, demo, cluster,
install-rqlite)."""

from raftflow.engine.ops.cli.common import Exit, load_engine
from raftflow.engine.ops.cli.main import cli, main

__all__ = ["Exit", "cli", "load_engine", "main"]
