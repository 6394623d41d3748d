"""The product has no test hooks: no module outside the command line reads the process
environment (a test hook there -- once a clock offset file that a variable named -- would
be a way to change a running worker's behaviour from outside). The command line reads
its variables at the edge (``engine/ops/cli``); the local rqlite harness
(``transports/rqlite/local``) is tooling for tests and demos, not the runtime."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("engine", "transports", "stores", "raftflow")
EDGES = (ROOT / "engine" / "ops" / "cli", ROOT / "transports" / "rqlite" / "local")


def environment_reads(path: Path) -> list[str]:
    """``os.environ`` / ``os.getenv`` / ``os.putenv`` uses and ``RAFTFLOW_TEST`` strings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: os.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            names = {alias.name for alias in node.names} & {"environ", "getenv", "environb"}
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: from os import {n}" for n in names]
        if isinstance(node, ast.Constant) and "RAFTFLOW_TEST" in str(node.value):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    return found


def test_no_product_module_reads_the_environment() -> None:
    modules = [
        path
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if not any(edge in path.parents for edge in EDGES)
    ]
    assert len(modules) > 50  # the walk found the product
    assert [read for path in modules for read in environment_reads(path)] == []
