"""Named SQL statements loaded from ``.sql`` files (procrastinate's ``queries.sql`` shape).

A file is a sequence of blocks, each opened by a ``-- name: <name>`` line and holding one
statement; blocks named ``fragment.*`` are pieces of SQL that other blocks include as
``{{fragment.name}}``. The schema's files (``transports/db/migrations/``) have the same form.
Whole-line comments are dropped (they document the file, not the request); so is the
trailing ``;``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

from raftflow.transports.db.flow import Params, Statement

_NAME = re.compile(r"^--\s*name:\s*(\S+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{\{(fragment\.[\w.]+)\}\}")


@dataclass(frozen=True)
class Catalogue:
    """The statements of one ``.sql`` file, by name."""

    prefix: str
    queries: dict[str, str]

    def __call__(self, name: str, params: Params = ()) -> Statement:
        return Statement(f"{self.prefix}.{name}", self.queries[name], params)

    def explain(self, name: str, params: Params = ()) -> Statement:
        """``EXPLAIN QUERY PLAN`` of a statement, to check which indexes it uses.

        rqlite 8.26 explains reads only: it refuses ``EXPLAIN`` of a write on
        ``/db/query`` and returns no rows for it elsewhere. Explain writes on SQLite.
        """
        return Statement(
            f"{self.prefix}.{name}.plan", "EXPLAIN QUERY PLAN " + self.queries[name], params
        )


def load(package: str, filename: str, prefix: str) -> Catalogue:
    """Load ``filename`` shipped in ``package``; statement names get ``prefix.``."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    queries = parse(text, filename)
    return Catalogue(prefix, {n: q for n, q in queries.items() if not n.startswith("fragment.")})


def parse(text: str, filename: str) -> dict[str, str]:
    """The named blocks of a ``.sql`` text, in file order, fragments included."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        sql = "\n".join(lines).strip().rstrip(";").strip()
        if name in queries:
            raise ValueError(f"{filename}: statement {name!r} is defined twice")
        queries[name] = sql
    for name in queries:  # fragments may include fragments
        while _INCLUDE.search(queries[name]):
            queries[name] = _INCLUDE.sub(lambda m: queries[m.group(1)], queries[name])
    return queries
