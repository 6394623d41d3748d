"""Users' SQLAlchemy statements as raftflow statements: what a transaction step may run.

Each statement (SQLAlchemy Core or ``text()``) is compiled for SQLite with named
parameters and checked: anything but SQLAlchemy statements, DDL, transaction control,
several statements in one, ``RETURNING``, raftflow's own tables (their names come from the
migrations) and ``sqlite_`` names, parameters that are not JSON scalars once SQLAlchemy's
SQLite type conversion has run, are refused (:class:`RefusedStatementError`) before
anything is sent.

Kept apart from :mod:`raftflow.engine.workflow.transaction`, which imports it on first use, so that
``import raftflow`` does not import SQLAlchemy (nearly half of its import time, paid by
every worker process and CLI command).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, cast

from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.db.schema import MIGRATIONS
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable
from sqlalchemy.sql import visitors
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.ddl import ExecutableDDLElement
from sqlalchemy.sql.dml import Delete, Insert, Update
from sqlalchemy.sql.elements import ClauseElement, TextClause
from sqlalchemy.sql.schema import MetaData
from sqlalchemy.sql.selectable import CompoundSelect, Select, TableClause

from raftflow.errors import RefusedStatementError

DIALECT = sqlite.dialect(paramstyle="named")

_CREATED = re.compile(
    r"\bCREATE\s+(?:UNIQUE\s+)?(?:TABLE|VIEW|TRIGGER|INDEX)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"[\"`\[]?(\w+)",
    re.IGNORECASE,
)


def _reserved_names() -> frozenset[str]:
    """Every table, view, trigger and index raftflow's migrations create."""
    names = {"raftflow_schema", "transaction_checks"}
    for migration in MIGRATIONS:
        for statement in migration.statements:
            names.update(m.lower() for m in _CREATED.findall(statement.sql))
    return frozenset(names)


#: Names a transaction step may not touch (and ``sqlite_*``).
RESERVED = _reserved_names()

_TOKEN = re.compile(
    r"""'(?:[^']|'')*'|"((?:[^"]|"")*)"|`([^`]*)`|\[([^\]]*)\]|--[^\n]*|/\*.*?(?:\*/|$)"""
    r"""|([A-Za-z_][A-Za-z0-9_$]*)|(;)|\S""",
    re.DOTALL,
)
_REFUSED_FIRST = {
    "CREATE": "DDL",
    "DROP": "DDL",
    "ALTER": "DDL",
    "REINDEX": "DDL",
    "VACUUM": "DDL",
    "ANALYZE": "DDL",
    "PRAGMA": "a PRAGMA",
    "ATTACH": "ATTACH",
    "DETACH": "DETACH",
    "BEGIN": "transaction control",
    "COMMIT": "transaction control",
    "END": "transaction control",
    "ROLLBACK": "transaction control",
    "SAVEPOINT": "transaction control",
    "RELEASE": "transaction control",
}
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def _words(sql: str) -> tuple[list[str], list[str], bool]:
    """The keywords/identifiers of ``sql`` (upper-cased, quoted ones included), the
    identifiers to check against reserved names, and whether anything follows a ``;``."""
    words: list[str] = []
    names: list[str] = []
    after_semicolon = False
    seen_semicolon = False
    for match in _TOKEN.finditer(sql):
        text = match.group(0)
        if text.startswith(("--", "/*")):
            continue
        if match.group(5):
            seen_semicolon = True
            continue
        if seen_semicolon:
            after_semicolon = True
        quoted = match.group(1) or match.group(2) or match.group(3)
        if quoted is not None:
            names.append(quoted.replace('""', '"'))
        elif match.group(4):
            words.append(match.group(4).upper())
            names.append(match.group(4))
    return words, names, after_semicolon


def _check_sql(sql: str, *, read: bool, check_names: bool) -> None:
    words, names, several = _words(sql)
    if several:
        raise RefusedStatementError("a transaction step runs one statement at a time (no ';')")
    if not words:
        raise RefusedStatementError("empty statement")
    first = words[0]
    if first in _REFUSED_FIRST:
        raise RefusedStatementError(
            f"{_REFUSED_FIRST[first]} is refused in a transaction step ({first} ...): create "
            "tables with engine.create_tables(metadata); the engine makes the transaction"
        )
    if "RETURNING" in words:
        raise RefusedStatementError(
            "RETURNING is refused: writes are buffered and return nothing (read first)"
        )
    if check_names:
        for name in names:
            _check_name(name)
    if read:
        if first not in ("SELECT", "WITH"):
            raise RefusedStatementError(
                f"tx.query/first/scalar take a SELECT, not {first} (writes go to tx.execute)"
            )
        if first == "WITH" and any(w in _WRITES for w in words):
            raise RefusedStatementError("a read may not write (writes go to tx.execute)")
    elif first not in _WRITES and not (first == "WITH" and any(w in _WRITES for w in words)):
        raise RefusedStatementError(
            f"tx.execute takes INSERT, UPDATE or DELETE, not {first} (reads go to tx.query)"
        )


def _check_name(name: str) -> None:
    lowered = name.lower()
    if lowered in RESERVED or lowered.startswith("sqlite_"):
        raise RefusedStatementError(
            f"{name!r} is one of raftflow's own tables (or SQLite's): a transaction step may "
            "not read or write it"
        )


def _json_scalar(name: str, value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise RefusedStatementError(
                f"parameter {name!r}: {value} does not fit SQLite's INTEGER"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RefusedStatementError(f"parameter {name!r}: {value} is not a finite number")
        return value
    raise RefusedStatementError(
        f"parameter {name!r} is a {type(value).__name__}: parameters must be JSON scalars "
        "(None, bool, int, float, str) after SQLAlchemy's SQLite type conversion"
    )


#: Compiled statements by SQLAlchemy's cache key (the statement's structure, not its
#: values): compiling is most of a transaction step's CPU otherwise.
_COMPILED: dict[tuple[Any, bool], tuple[SQLCompiler, str]] = {}
MAX_COMPILED = 1000


def _compile(clause: ClauseElement, key: Any, read: bool) -> tuple[SQLCompiler, str]:
    """Check and compile a statement (once per structure: the result is cached)."""
    core = not isinstance(clause, TextClause)
    if core:
        if getattr(clause, "_returning", ()):
            raise RefusedStatementError("RETURNING is refused: writes are buffered (read first)")
        for element in visitors.iterate(clause):
            if isinstance(element, TableClause):
                if getattr(element, "schema", None) is not None:
                    raise RefusedStatementError(
                        f"table {element.name!r} names a schema: one database only"
                    )
                _check_name(element.name)
    compiled = clause.compile(
        dialect=DIALECT, cache_key=key, compile_kwargs={"render_postcompile": True}
    )
    assert isinstance(compiled, SQLCompiler)
    sql = str(compiled)
    _check_sql(sql, read=read, check_names=not core)
    return compiled, sql


def compile_statement(
    statement: Any, params: Mapping[str, Any] | None = None, *, read: bool
) -> Statement:
    """``statement`` (SQLAlchemy Core or ``text()``) as one parameterized SQLite statement;
    :class:`RefusedStatementError` for what a transaction step may not run."""
    if isinstance(statement, str):
        raise RefusedStatementError(
            "a transaction step takes SQLAlchemy statements, not strings: wrap SQL in "
            "sqlalchemy.text() with bound parameters (:name), never build it with values"
        )
    if isinstance(statement, ExecutableDDLElement):
        raise RefusedStatementError(
            f"DDL ({type(statement).__name__}) is refused in a transaction step: create "
            "tables with engine.create_tables(metadata)"
        )
    kinds: tuple[type[Any], ...] = (Select, CompoundSelect) if read else (Insert, Update, Delete)
    if not isinstance(statement, (*kinds, TextClause)):
        if isinstance(statement, ClauseElement):
            what = "a SELECT" if read else "an INSERT, UPDATE or DELETE"
            raise RefusedStatementError(
                f"{type(statement).__name__} is not {what} (reads go to tx.query, writes to "
                "tx.execute)"
            )
        raise RefusedStatementError(
            f"a transaction step takes SQLAlchemy Core statements or text(), not "
            f"{type(statement).__name__}"
        )
    if params is not None and not isinstance(params, Mapping):
        raise RefusedStatementError("params must be a mapping of parameter names to values")
    clause = cast(ClauseElement, statement)
    key = clause._generate_cache_key()
    cached = None if key is None else _COMPILED.get((key.key, read))
    try:
        if cached is None:
            compiled, sql = _compile(clause, key, read)
            if key is not None and not any(
                b.expanding or b.literal_execute for b in compiled.binds.values()
            ):  # IN lists change the SQL with their length: compiled every time
                if len(_COMPILED) >= MAX_COMPILED:
                    _COMPILED.clear()
                _COMPILED[(key.key, read)] = (compiled, sql)
            values = compiled.construct_params(dict(params or {})) or {}
        else:
            compiled, sql = cached
            extracted = key.bindparams if key is not None else None
            values = compiled.construct_params(dict(params or {}), extracted_parameters=extracted)
            values = values or {}
    except RefusedStatementError:
        raise
    except sa_exc.SQLAlchemyError as exc:
        raise RefusedStatementError(f"the statement does not compile for SQLite: {exc}") from None
    processors = getattr(compiled, "_bind_processors", {}) or {}
    bound: dict[str, Any] = {}
    for name, value in values.items():
        processor = processors.get(name)
        if processor is not None:
            try:
                value = processor(value)
            except Exception as exc:  # a type's own conversion refused the value
                raise RefusedStatementError(f"parameter {name!r}: {exc}") from None
        bound[name] = _json_scalar(name, value)
    if read and sql.lstrip()[:4].upper() == "WITH":
        sql = f"SELECT * FROM ({sql})"  # rqlite takes a read by its first word
    return Statement("transaction.read" if read else "transaction.write", sql, bound)


def create_tables_request(metadata: MetaData) -> Request:
    """``CREATE TABLE / INDEX IF NOT EXISTS`` of every table of ``metadata``, one request."""

    if not isinstance(metadata, MetaData):
        raise RefusedStatementError(
            f"create_tables takes a sqlalchemy MetaData, not {type(metadata).__name__}"
        )
    statements = []
    for table in metadata.sorted_tables:
        if table.schema is not None:
            raise RefusedStatementError(f"table {table.name!r} names a schema: one database only")
        _check_name(table.name)
        ddl = CreateTable(table, if_not_exists=True).compile(dialect=DIALECT)
        statements.append(Statement(f"create_tables.{table.name}", str(ddl).strip()))
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            if index.name is not None:
                _check_name(str(index.name))
            sql = str(CreateIndex(index, if_not_exists=True).compile(dialect=DIALECT)).strip()
            statements.append(Statement(f"create_tables.{index.name}", sql))
    if not statements:
        raise RefusedStatementError("create_tables: the metadata holds no table")
    return Request(tuple(statements), transaction=True)
