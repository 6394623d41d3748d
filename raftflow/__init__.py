"""raftflow: durable workflows as plain Python functions, on an rqlite cluster.

The public API lives here; the subpackages are ``raftflow.engine`` (workflows, steps,
workers), ``raftflow.transports`` (the lease-based queue, ``RqliteTransport``) and
``raftflow.stores`` (executions and step records, ``RqliteStore``).

>>> from raftflow import Engine
>>> engine = Engine()   # a local SQLite file; Engine.from_url("http://host:4001") for rqlite
"""

from importlib.metadata import PackageNotFoundError, version

from raftflow.engine import *  # noqa: F403  (the engine's __all__ is the public API)
from raftflow.engine import __all__ as _engine_all

try:
    __version__ = version("raftflow")
except PackageNotFoundError:  # pragma: no cover - imported from a source tree
    __version__ = "0+unknown"

__all__ = [*_engine_all, "__version__"]
