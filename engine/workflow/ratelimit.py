"""RateLimit: at most ``limit`` starts of a step per ``per`` seconds, cluster-wide.

``@engine.step(rate_limit=RateLimit(10, per=1.0, key=lambda customer, amount: customer))``.
Before each attempt of the step, the worker reserves a start time in the database (one
request, one Raft entry): the earliest that keeps at most ``limit`` reserved starts of the
key in any ``per`` seconds, after every earlier reservation (so callers are served in
order). The step then waits for it like a durable sleep: in place for a second or less,
parked beyond that -- the execution holds no lease and no worker slot while it waits, and
no one polls. A reservation is named by the execution, the call and the attempt, so the
replay after a park finds its own rather than taking another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from raftflow.engine.workflow.keys import user_key
from raftflow.transports.payload import check_id, check_seconds

from raftflow.errors import InvalidArgumentError


@dataclass(frozen=True)
class RateLimit:
    """At most ``limit`` starts per ``per`` seconds; per value of ``key`` when given (a
    str, or a function of the step's arguments returning one)."""

    limit: int
    per: float = 1.0
    key: str | Callable[..., str] | None = None

    def __post_init__(self) -> None:
        limit = self.limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgumentError(f"a rate limit must be an int >= 1, not {limit!r}")
        check_seconds(self.per, what="per", allow_zero=False)
        if self.key is not None and not (isinstance(self.key, str) or callable(self.key)):
            raise InvalidArgumentError("key must be a str or a function of the step's arguments")

    def key_for(self, step: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The key whose starts are counted: the step's name, and the key after a colon."""
        if self.key is None:
            return step
        if callable(self.key):
            what = f"the rate limit key of step {step!r}"
            return user_key(what, "its arguments", step, self.key, *args, **kwargs)
        return check_id(f"{step}:{self.key}", what="rate limit key")
