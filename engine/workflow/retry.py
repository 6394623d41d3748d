"""Retry: how often, and after how long, a failing step runs again.

``@engine.step(retry=Retry(max_attempts=5, delay=1.0, backoff=2.0))``. Each failed attempt
is recorded (visible in ``handle.steps()``) before the next one is waited for, so a worker
that dies between attempts is followed by the next attempt, not the first. A wait longer
than about a second parks the execution: it holds no worker slot meanwhile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from raftflow.errors import InvalidArgumentError


@dataclass(frozen=True)
class Retry:
    """Run a failing step up to ``max_attempts`` times in all, waiting ``delay`` seconds
    before the second, ``delay * backoff`` before the third... (at most ``max_delay``), for
    errors that are instances of ``on``; other errors fail the step at once."""

    max_attempts: int = 3
    delay: float = 1.0
    backoff: float = 2.0
    max_delay: float = 300.0
    on: tuple[type[BaseException], ...] = (Exception,)

    def __post_init__(self) -> None:
        attempts = self.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise InvalidArgumentError(f"max_attempts must be an int >= 1, not {attempts!r}")
        for name, least in (("delay", 0.0), ("backoff", 1.0), ("max_delay", 0.0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidArgumentError(f"{name} must be a number, not {value!r}")
            if not math.isfinite(value) or value < least:
                raise InvalidArgumentError(f"{name} must be finite and >= {least}, not {value!r}")
        on = self.on if isinstance(self.on, tuple) else (self.on,)
        if not on or not all(isinstance(c, type) and issubclass(c, BaseException) for c in on):
            raise InvalidArgumentError("on must be an exception class or a tuple of them")
        object.__setattr__(self, "on", on)

    def retries(self, attempt: int, error: BaseException) -> bool:
        """Whether attempt ``attempt`` failing with ``error`` is followed by another."""
        return attempt < self.max_attempts and isinstance(error, self.on)

    def delay_after(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        return float(min(self.delay * self.backoff ** (attempt - 1), self.max_delay))
