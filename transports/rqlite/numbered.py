"""Named parameters sent to rqlite as numbered ones (``:name`` -> ``?N``, values by position).

raftflow's statements name their parameters (``:execution_id``), which keeps the SQL
catalogue readable. On the wire a named parameter costs rqlite more than a positional
one: it is decoded as a JSON object, carried by name in the Raft entry, and bound by a
name lookup on every node (go-sqlite3 tries ``:``, ``@`` and ``$`` for each). So the
encoder sends ``[sql', v1, v2, ...]`` where ``sql'`` numbers each distinct name in order of
first appearance; SQLite's ``?N`` binds the N-th value, however often it appears.

The rewrite is lexical, and only of what is certainly a parameter: text in string
literals, quoted identifiers and comments is left alone. A statement is sent as it was
(named) whenever the rewrite is not exact: another parameter form in it (``?``, ``@``,
``$``), or a name without a value (SQLite binds such a name NULL: it still does). A key
that the statement does not name is dropped, as SQLite ignores it when named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from operator import itemgetter
from typing import Any

# One token per match, in SQLite's lexical order of precedence: comments, quoted text
# (with its doubled-quote escapes), then the parameter forms. A quote left open swallows
# the rest of the text (then nothing after it is rewritten).
_TOKENS = re.compile(
    r"""
      --[^\n]*                       # line comment
    | /\*.*?(?:\*/|\Z)               # block comment
    | '(?:[^']|'')*(?:'|\Z)          # string literal
    | "(?:[^"]|"")*(?:"|\Z)          # quoted identifier
    | `(?:[^`]|``)*(?:`|\Z)          # MySQL-style quoted identifier
    | \[[^\]]*(?:\]|\Z)              # MS-style quoted identifier
    | :(?P<name>\w+)                 # the named parameter we rewrite
    | (?P<other>[?@$])               # any other parameter form: leave the statement as is
    """,
    re.VERBOSE | re.DOTALL,
)


@lru_cache(maxsize=512)
def numbering(sql: str) -> tuple[str, tuple[str, ...]] | None:
    """``sql`` with ``:name`` as ``?N``, and the names in ``N`` order; ``None`` when the
    statement holds another parameter form (or none at all)."""
    names: list[str] = []
    index: dict[str, int] = {}
    pieces: list[str] = []
    last = 0
    for match in _TOKENS.finditer(sql):
        if match.group("other"):
            return None
        name = match.group("name")
        if name is None:
            continue
        if name not in index:
            names.append(name)
            index[name] = len(names)
        pieces.append(sql[last : match.start()])
        pieces.append(f"?{index[name]}")
        last = match.end()
    if not names:
        return None
    pieces.append(sql[last:])
    return "".join(pieces), tuple(names)


def positional(sql: str, params: Mapping[str, Any]) -> list[Any] | None:
    """``[sql', v1, v2, ...]`` for rqlite's JSON body, or ``None`` to send it named."""
    numbered = _values_in_order(sql)
    if numbered is None:
        return None
    text, values = numbered
    try:
        return [text, *values(params)]
    except KeyError:
        return None


@lru_cache(maxsize=512)
def _values_in_order(sql: str) -> tuple[str, Callable[[Mapping[str, Any]], Any]] | None:
    """The numbered text, and what takes a statement's values from its parameters in
    ``N`` order (a tuple); ``None`` as :func:`numbering`."""
    numbered = numbering(sql)
    if numbered is None:
        return None
    text, names = numbered
    if len(names) == 1:  # itemgetter of one name gives the value, not a tuple
        (name,) = names
        return text, lambda params: (params[name],)
    return text, itemgetter(*names)
