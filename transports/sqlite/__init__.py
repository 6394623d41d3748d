"""The queue on one local SQLite file: the same schema, SQL and semantics as on rqlite.

For development, tests and single-machine use: no server to run. Worker processes on the
same machine may share the file; SQLite's write lock serializes their claims as Raft does
for rqlite. Lease times come from this machine's clock, which every process shares.
``SqlTransport.from_url("sqlite:///app.db")`` (or ``"sqlite://"`` in memory) opens it; this
package only supplies the connection (:mod:`raftflow.transports.sqlite.connection`).
"""

from raftflow.transports.sqlite.connection import (
    AsyncSqliteConnection,
    SqliteConnection,
    path_from_url,
)

__all__ = ["AsyncSqliteConnection", "SqliteConnection", "path_from_url"]
