"""The database's schema, versioned: numbered migrations and the one way to apply them.

The whole schema -- the queue's tables and the store's, which share one database because
a commit writes both in one statement -- is the sum of the migrations in
``transports/db/migrations/NNNN_name.sql``, applied in order. The version applied is recorded
in ``raftflow_schema`` (one row per migration). How to add one: ``CONTRIBUTING.md``.

Each migration is applied as **one transaction** (one rqlite request: one Raft entry, all
or nothing) whose first statement records its version. A trigger refuses that row unless
it is exactly the next version, so two migrators racing (two deployments starting at once)
cannot both apply a migration: Raft orders their requests, the second one's first
statement fails, and its whole transaction rolls back. A request that fails ambiguously
(the leader died; it may or may not have applied) is resolved by reading the version again.

Who migrates:

- ``raftflow migrate --url ...`` (``--dry-run`` prints the SQL): the operator's command.
- An **empty** database is initialized by whoever connects first (there is nothing to
  upgrade and no worker to disturb).
- An **older** database is migrated on connect only with ``auto_migrate`` (the default for
  the embedded SQLite backend, off for rqlite); otherwise connecting fails with
  :class:`SchemaOutdatedError`, which names the command to run.
- A **newer** database (a later release migrated it) is refused with
  :class:`SchemaTooNewError`: this code could misread its tables.

A database created before versions existed (raftflow 0.1's ``CREATE ... IF NOT EXISTS``)
has the tables but no ``raftflow_schema``; it counts as version 0 and migration 1, whose
statements are all idempotent, brings it to version 1.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from raftflow.transports.db.catalogue import parse
from raftflow.transports.db.flow import Flow, ReadLevel, Request, Response, Statement

from raftflow.errors import (
    ConfigurationError,
    SchemaOutdatedError,
    SchemaTooNewError,
    UnavailableError,
)

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")

#: Created if missing before every migration, in the same transaction.
BOOTSTRAP = (
    Statement(
        "schema.versions",
        "CREATE TABLE IF NOT EXISTS raftflow_schema (version INTEGER PRIMARY KEY,"
        " name TEXT NOT NULL, applied_at REAL NOT NULL, applied_by TEXT NOT NULL)",
    ),
    Statement(
        "schema.next_version_only",
        "CREATE TRIGGER IF NOT EXISTS raftflow_schema_next BEFORE INSERT ON raftflow_schema"
        " WHEN NEW.version <> (SELECT COALESCE(MAX(version), 0) FROM raftflow_schema) + 1"
        " BEGIN SELECT RAISE(ABORT, 'raftflow schema: not the next version'); END",
    ),
)

#: The tables every version has: their presence tells "created before versions" from empty.
_CORE_TABLES = ("messages", "groups", "executions", "steps")


@dataclass(frozen=True)
class Migration:
    """One numbered migration: its statements, applied as one transaction."""

    version: int
    name: str
    statements: tuple[Statement, ...]

    def request(self, applied_at: float, applied_by: str) -> Request:
        """Record the version first (the guard), then change the schema."""
        record = Statement(
            "schema.record",
            "INSERT INTO raftflow_schema (version, name, applied_at, applied_by)"
            " VALUES (?, ?, ?, ?)",
            (self.version, self.name, applied_at, applied_by),
        )
        return Request((*BOOTSTRAP, record, *self.statements), transaction=True)

    def sql(self) -> str:
        """The migration as a script (``raftflow migrate --dry-run``)."""
        return "\n\n".join(f"-- {s.name}\n{s.sql};" for s in self.statements)


def load_migrations(
    source: str | Path = "raftflow.transports.db.migrations",
) -> tuple[Migration, ...]:
    """Every migration in ``source`` (a package, or a folder), in order; their numbers must
    run 1, 2, ..."""
    folder = source if isinstance(source, Path) else resources.files(source)
    found = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match is None:
            continue
        version, name = int(match.group(1)), match.group(2)
        queries = parse(entry.read_text(encoding="utf-8"), entry.name)
        statements = tuple(
            Statement(f"migration.{version}.{key}", sql) for key, sql in queries.items()
        )
        found.append(Migration(version, name, statements))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise ConfigurationError(f"migrations in {source} are not numbered 1..n: {found}")
    return tuple(found)


MIGRATIONS = load_migrations()
#: The version this code runs on.
LATEST = MIGRATIONS[-1].version


@dataclass(frozen=True)
class SchemaState:
    """What a database holds: its version (0 before any) and whether it is empty."""

    version: int
    empty: bool


def read_state(level: ReadLevel = "strong") -> Flow[SchemaState]:
    """The database's schema version: one read, through the Raft log by default
    (``strong``: right after a cluster restart a weak read can miss tables that exist)."""
    names = ", ".join(f"'{t}'" for t in _CORE_TABLES)
    probe = Statement(
        "schema.probe",
        "SELECT (SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"
        " AND name = 'raftflow_schema') AS versioned,"
        f" (SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ({names}))"
        " AS tables",
    )
    # Fails with "no such table" before version 1; a failed read changes nothing.
    version = Statement(
        "schema.version", "SELECT COALESCE(MAX(version), 0) AS version FROM raftflow_schema"
    )
    response = yield Request((probe, version), transaction=False, level=level)
    row = response[0].first() if response[0].error is None else None
    if row is None:
        response.raise_for_errors()
        row = {}
    if not row.get("versioned"):
        return SchemaState(version=0, empty=not row.get("tables"))
    found = response.raise_for_errors()[1].first() or {}
    return SchemaState(version=int(found.get("version") or 0), empty=False)


def migrate(
    target: int | None = None,
    *,
    state: SchemaState | None = None,
    migrations: tuple[Migration, ...] = MIGRATIONS,
) -> Flow[list[Migration]]:
    """Apply every migration above the database's version up to ``target`` (the latest),
    each as one transaction; returns those this call applied (another migrator may apply
    some). ``state``: the version just read, if the caller has it."""
    latest = migrations[-1].version
    target = latest if target is None else target
    if not 0 <= target <= latest:
        raise ConfigurationError(f"no schema version {target}: this code knows 1 to {latest}")
    applied: list[Migration] = []
    if state is None:
        state = yield from read_state()
    _refuse_newer(state, latest)
    migrator = uuid.uuid4().hex  # tells our record from another migrator's
    while state.version < target:
        # An empty database gets every migration in one transaction: nobody connecting
        # meanwhile ever sees it half made (and so "older" than its code).
        group = migrations[state.version : target if state.empty else state.version + 1]
        try:
            response: Response | None = yield _request(group, time.time(), migrator)
        except UnavailableError as exc:
            if not exc.ambiguous:
                raise
            response = None
        if response is not None and not response.ambiguous:
            if not response.rolled_back:
                applied.extend(group)
                state = SchemaState(group[-1].version, empty=False)
                continue
            if not _lost_race(response):
                response.raise_for_errors()
        # Another migrator got there first, or we cannot tell whether we did: ask.
        state = yield from read_state()
        if response is None or response.ambiguous:
            by = yield from _applied_by(group[0].version)
            if by == migrator:
                applied.extend(group)
    return applied


def _request(group: Sequence[Migration], applied_at: float, migrator: str) -> Request:
    """Migrations applied together as one transaction, each recording its version first."""
    statements: list[Statement] = list(BOOTSTRAP)
    for migration in group:
        statements.extend(migration.request(applied_at, migrator).statements[len(BOOTSTRAP) :])
    return Request(tuple(statements), transaction=True)


def _applied_by(version: int) -> Flow[str | None]:
    statement = Statement(
        "schema.applied_by",
        "SELECT applied_by FROM raftflow_schema WHERE version = ?",
        (version,),
    )
    response = yield Request((statement,), level="strong")
    result = response[0]
    row = result.first() if result.error is None else None
    return None if row is None else row["applied_by"]


def ensure(
    auto_migrate: bool, *, migrations: tuple[Migration, ...] = MIGRATIONS
) -> Flow[list[Migration]]:
    """Make sure the database runs this code's schema: initialize an empty one, migrate an
    older one when ``auto_migrate``, refuse otherwise (see the module docstring)."""
    latest = migrations[-1].version
    # Weak first (no Raft entry: a process's connect costs none on an up-to-date database).
    # A weak read can lag but never leads -- a leader applies only committed entries and
    # versions only grow -- so the latest version, or a newer one, read weakly is so; an
    # older one, or none, is read again through the log before anything is done about it.
    state = yield from read_state("weak")
    _refuse_newer(state, latest)
    if state.version == latest:
        return []
    state = yield from read_state()
    _refuse_newer(state, latest)
    if state.version == latest:
        return []
    if state.empty or auto_migrate:
        return (yield from migrate(state=state, migrations=migrations))
    raise SchemaOutdatedError(
        f"the database's schema is version {state.version}, this raftflow runs version "
        f"{latest}: run `raftflow migrate --url <the database URL>` first (or connect with "
        "auto_migrate=True)"
    )


def _refuse_newer(state: SchemaState, latest: int) -> None:
    if state.version > latest:
        raise SchemaTooNewError(
            f"the database's schema is version {state.version}, newer than this raftflow's "
            f"{latest}: upgrade raftflow (a database is never downgraded)"
        )


def _lost_race(response: Response) -> bool:
    """The transaction failed at its version record: another migrator applied it first."""
    error = response[len(BOOTSTRAP)].error or ""
    return "not the next version" in error or "UNIQUE constraint failed" in error
