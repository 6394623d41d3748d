"""raftflow's engine: durable workflows as plain Python functions.

Its subpackages, by role: :mod:`.workflow` (the workflow core: registry, replay, step path,
durable primitives), :mod:`.runtime` (the worker), :mod:`.client` (handles) and :mod:`.ops`
(command line, dashboard, metrics, tracing, logs). The public API is :mod:`raftflow`'s::

    from raftflow import Engine

    engine = Engine()  # a local SQLite file; Engine.from_url("http://host:4001") for rqlite
"""

from raftflow.engine.app import Engine

__all__ = ["Engine"]
