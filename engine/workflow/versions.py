"""Application versions: what an execution is pinned to.

An engine's version is given (``Engine(version="2026.12.1")``, ``raftflow worker
--version``) or, by default, a hash of the source of the workflows it registers: code
whose workflows changed is a new version. An execution started by code of one version is
run only by workers of that version (its lane names it, engine/workflow/queues.py), so a
worker never replays a history that other code recorded -- unless told to adopt the
executions of versions no live worker serves (``--adopt-older``), or an operator moves
them (``raftflow versions promote``) after checking them (``raftflow replay``).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import types
from collections.abc import Callable, Iterable
from typing import Any

from raftflow.errors import InvalidArgumentError

_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+:-]{0,63}")


def check_version(value: object) -> str:
    """A version: 1-64 letters, digits, ``. _ + : -`` (no ``@`` or ``/``: lanes end with it)."""
    if not isinstance(value, str) or not _VERSION.fullmatch(value):
        raise InvalidArgumentError(
            "a version is 1-64 letters, digits, '.', '_', '+', ':' or '-' (starting with a "
            f"letter or digit), not {value!r}"
        )
    return value


def source_version(workflows: Iterable[tuple[str, Callable[..., Any]]]) -> str:
    """The default version: a hash of each registered workflow's name and source (12 hex
    digits). Only the workflow functions count: a step's body may change freely, a
    workflow's code is what a replay must meet again."""
    digest = hashlib.sha256()
    for name, fn in sorted(workflows, key=lambda item: item[0]):
        digest.update(name.encode() + b"\0" + _source(fn).encode() + b"\0")
    return digest.hexdigest()[:12]


def _source(fn: Callable[..., Any]) -> str:
    target = inspect.unwrap(fn)
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):  # defined where no source file is (a REPL, exec)
        code = getattr(target, "__code__", None)
        return getattr(target, "__qualname__", "?") if code is None else _code_text(code)


def _code_text(code: types.CodeType) -> str:
    """Bytecode and constants, nested functions' included (a code object's repr holds its
    address: not the same in two processes)."""
    consts = [_code_text(c) if inspect.iscode(c) else repr(c) for c in code.co_consts]
    return code.co_code.hex() + "|" + ",".join(consts) + "|" + ",".join(code.co_names)
