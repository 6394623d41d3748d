"""``schema.sql``: what a fresh database holds, in one file a reader can search.

The schema *is* the numbered migrations (:mod:`raftflow.transports.db.schema`), each
applied once, in order; a later one may drop and recreate what an earlier one made. So that
nobody has to add them up in their head, ``transports/db/schema.sql`` holds the result --
every table, index, view and trigger of a database migrated from zero, as SQLite itself
reports it -- and a test checks it against a fresh migration, so it cannot drift. It is
never applied: the migrations are.

Regenerate it after adding a migration::

    python -m raftflow.transports.db.schema_file > transports/db/schema.sql   # make schema
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from raftflow.transports.db.database import open_database
from raftflow.transports.db.schema import MIGRATIONS, migrate

#: The order objects are listed in (then by name): what each depends on comes first.
_KINDS = ("table", "index", "view", "trigger")


def render() -> str:
    """The schema of a database migrated from zero to the latest version, as SQL text."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "fresh.db"
        database = open_database(f"sqlite:///{path}")
        try:
            database.run(migrate())
        finally:
            database.close()
        with sqlite3.connect(path) as db:
            rows = db.execute(
                "SELECT type, name, sql FROM sqlite_master "
                "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
    objects = sorted(rows, key=lambda row: (_KINDS.index(row[0]), row[1]))
    latest = MIGRATIONS[-1].version
    lines = [
        f"-- raftflow's schema at version {latest}: what a database migrated from zero holds.",
        "-- Generated from transports/db/migrations/ (python -m raftflow.transports.db.schema_file",
        "-- > transports/db/schema.sql, or `make schema`); never applied, never edited by hand.",
    ]
    for kind, name, sql in objects:
        lines += ["", f"-- {kind}: {name}", sql.strip() + ";"]
    return "\n".join(lines) + "\n"


def main() -> None:
    print(render(), end="")


if __name__ == "__main__":
    main()
