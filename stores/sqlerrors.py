"""Whose failure a statement error of a transaction step is: the step's, or the database's.

A transaction step's own SQL may be refused for what it says, and that is the step's
outcome (its attempt fails with :class:`~raftflow.errors.TransactionAbortedError`,
nothing written, retried per its ``Retry`` and recorded):

- a constraint of the user's schema: UNIQUE (a primary key too), CHECK, NOT NULL,
  FOREIGN KEY, a STRICT column's type;
- the SQL text itself: no such table or column, a syntax error, a wrong function call,
  a value SQLite cannot take (too big, an integer overflow, malformed JSON).

Anything else is the infrastructure's, never an outcome: the disk is full, an I/O error,
the database is locked or busy, read-only or corrupt, no leader -- and any message this
module does not know. The execution is handed back and the step runs again later.

The messages are SQLite's own (rqlite passes them through unchanged); they are all this
knows of an error on rqlite. A ``RAISE()`` in a trigger of the user's own tables carries
the user's text only: it cannot be told from an unknown failure, so it hands the execution
back (with a growing back-off) instead of failing the step -- check with ``expect_rows``
or a constraint instead.
"""

from __future__ import annotations

import re

#: The database's failures: checked first, so that no user pattern can claim them.
_INFRASTRUCTURE = re.compile(
    r"database or disk is full|disk I/O error|database is locked|database table is locked"
    r"|attempt to write a readonly database|database disk image is malformed"
    r"|^file is not a database|^out of memory|^unable to open database|^interrupted$"
    r"|^locking protocol|^database schema has changed|no transaction is active"
    r"|^not leader|leadership lost"
)

#: What the user's SQL caused (SQLite's messages for these errors).
_USER = re.compile(
    r"constraint failed"  # UNIQUE / CHECK / NOT NULL / FOREIGN KEY: ...
    r"|^datatype mismatch"
    r"|^cannot store \w+ value in \w+ column"  # STRICT tables
    r"|^no such (table|column|function|collation sequence):"
    r"|: syntax error$|^incomplete input$|^unrecognized token:"
    r"|^table \S+ has no column named "
    r"|^\d+ values for \d+ columns$"
    r"|^ambiguous column name:"
    r"|^wrong number of arguments to function "
    r"|^misuse of (aggregate|window function)"
    r"|^row value misused$|^sub-select returns \d+ columns"
    r"|^foreign key mismatch"
    r"|^cannot modify \S+ because it is a view$|^cannot UPDATE generated column"
    r"|^string or blob too big$|^too many SQL variables$|^too many columns"
    r"|^integer overflow$|^malformed JSON$|^JSON path error"
)


def is_step_refusal(message: str) -> bool:
    """Whether a transaction step's statement failed with ``message`` because of what the
    step's own SQL says (its outcome), not because of the database (handed back)."""
    if _INFRASTRUCTURE.search(message):
        return False
    return _USER.search(message) is not None
