"""A key computed by the user's function (a concurrency key, a rate limit key): a str, or
bad input named for what it keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raftflow.transports.payload import check_id

from raftflow.errors import InputValidationError


def user_key(
    what: str, on: str, prefix: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> str:
    """``prefix:fn(*args, **kwargs)``, checked as an id; a function that fails (on ``on``:
    what it was given) or returns something else than a str is
    :class:`InputValidationError` naming ``what``."""
    try:
        key = fn(*args, **kwargs)
    except Exception as exc:
        raise InputValidationError(f"{what} failed on {on}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(key, str):
        raise InputValidationError(f"{what} must return a str, not {type(key).__name__}")
    return check_id(f"{prefix}:{key}", what=what)
