"""Which statements rqlite's parse of a write cannot change: those sent with ``noparse``.

Before a write (or a mixed request) goes to Raft, the rqlite node that receives it parses
every statement with its own SQL parser, for two reasons: to replace ``RANDOM()``,
``RANDOMBLOB(N)`` and the functions of time called with ``'now'`` by literal values, so
that every node applies the same statement; and to notice a ``RETURNING`` clause, so that
the statement's rows come back. A statement in which none of those words appears comes
out of that parse exactly as it went in, and the parse costs the leader CPU on the
request's path (rqlite 8.26 parses each statement anew, every request). For a request made
only of such statements, raftflow asks rqlite to skip it (``noparse``): the same
statements reach Raft.

The test is lexical and errs one way only: any of the words, in any case and anywhere (a
column name, a comment, a string literal), and the request is parsed as before; so is any
statement with a non-ASCII character (no case folding beyond ASCII to get right).
See docs/performance.md, "What bounds the numbers".
"""

from __future__ import annotations

import functools
import re

#: The functions rqlite 8.26's rewriter acts on (``command/sql/processor.go``), its
#: ``now`` argument, and RETURNING.
_REWRITTEN = re.compile(
    r"\b(?:random|randomblob|date|time|datetime|julianday|unixepoch|strftime|timediff"
    r"|now|returning)\b",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=1024)
def parse_changes_nothing(sql: str) -> bool:
    """True when rqlite's parse can neither rewrite ``sql`` nor find a RETURNING in it."""
    return sql.isascii() and _REWRITTEN.search(sql) is None
