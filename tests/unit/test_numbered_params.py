"""Named parameters go to rqlite numbered (transports/rqlite/numbered.py): exactly, or named."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from raftflow.stores.flows import QUERIES as STORE
from raftflow.transports.db.flow import Request, Statement
from raftflow.transports.queue import QUERIES as QUEUE
from raftflow.transports.rqlite.numbered import numbering, positional
from raftflow.transports.rqlite.protocol import encode

from raftflow import Engine


def test_each_name_gets_one_number_in_order_of_first_appearance() -> None:
    sql = "UPDATE t SET a = :a, b = :b WHERE a = :a OR c = :c_2"
    assert numbering(sql) == (
        "UPDATE t SET a = ?1, b = ?2 WHERE a = ?1 OR c = ?3",
        ("a", "b", "c_2"),
    )
    assert positional(sql, {"c_2": 3, "b": 2, "a": 1}) == [
        "UPDATE t SET a = ?1, b = ?2 WHERE a = ?1 OR c = ?3", 1, 2, 3,
    ]  # fmt: skip


@pytest.mark.parametrize(
    "text",
    [
        "':x'",  # a string literal
        "'it''s :x'",  # with a doubled quote
        '":x"',  # a quoted identifier
        "`:x`",
        "[:x]",
        "-- :x\n",  # a line comment
        "/* :x */",  # a block comment
        "'$.x'",  # a JSON path: no parameter at all
    ],
)
def test_text_that_only_looks_like_a_parameter_is_left_alone(text: str) -> None:
    sql = f"SELECT {text} AS v, :real AS w"
    rewritten, names = numbering(sql) or ("", ())
    assert names == ("real",)
    assert rewritten == f"SELECT {text} AS v, ?1 AS w"


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT :a, ?", {"a": 1}),  # another parameter form in it
        ("SELECT :a, @b", {"a": 1, "b": 2}),
        ("SELECT :a, $b", {"a": 1, "b": 2}),
        ("SELECT :a, :b", {"a": 1}),  # a name without a value
        ("SELECT 1", {}),  # no parameter
        ("SELECT 'unclosed :a", {"a": 1}),  # the quote swallows the rest
    ],
)
def test_a_statement_that_cannot_be_rewritten_exactly_goes_named(
    sql: str, params: dict[str, Any]
) -> None:
    assert positional(sql, params) is None
    (body,) = json.loads(encode(Request((Statement("t", sql, params),)))[2])
    assert body == [sql, params]


def test_a_key_the_statement_does_not_name_is_dropped() -> None:
    assert positional("SELECT :a", {"a": 1, "b": 2}) == ["SELECT ?1", 1]


def test_positional_params_are_sent_as_they_are() -> None:
    (body,) = json.loads(encode(Request((Statement("t", "SELECT ?, ?", (1, "x")),)))[2])
    assert body == ["SELECT ?, ?", 1, "x"]


def _catalogue() -> list[Statement]:
    from bench.probe_compile import statements

    return statements()


def test_every_step_path_statement_means_the_same_numbered(tmp_path: Path) -> None:
    """SQLite compiles the rewritten statement to the same program as the named one
    (EXPLAIN: it and every trigger program it fires), and binds the same values."""
    path = tmp_path / "numbered.db"
    Engine.from_url(f"sqlite:///{path}", auto_migrate=True).close()
    db = sqlite3.connect(path)
    checked = 0
    for statement in _catalogue():
        named = dict(statement.params)
        rewritten = positional(statement.sql, named)
        if statement.name == "probe.raw":
            continue
        assert rewritten is not None, statement.name
        text, *values = rewritten
        program = _program(db.execute("EXPLAIN " + text, values).fetchall())
        assert program == _program(db.execute("EXPLAIN " + statement.sql, named).fetchall()), (
            statement.name
        )
        checked += 1
    assert checked > 15
    db.close()


def _program(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """EXPLAIN's rows, without the parameter's spelling (a ``Variable`` op's p4)."""
    return [(*row[:5], None, *row[6:]) if row[1] == "Variable" else row for row in rows]


def test_the_catalogues_statements_all_rewrite() -> None:
    """No statement of the store or the queue falls back to names by accident."""
    for statement in (
        STORE("lean_step", {}),
        STORE("start_direct", {}),
        STORE("lean_final_unlinked", {}),
        QUEUE("claim", {}),
    ):
        assert numbering(statement.sql) is not None, statement.name
