"""Named queues and the lanes they route by.

A workflow belongs to one queue (``@engine.workflow(queue="billing")``; ``"default"``
when unnamed). Its executions' events travel in the lane ``"<queue>/<workflow>"``
(transports/lanes.py): a worker claims only the lanes of the workflows it registers, in
the queues it serves, so an execution is never leased to a worker that cannot run it.
The lane ``""`` (events of executions started before lanes existed, or by a worker of an
earlier release) is served by every worker, as everything was before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from raftflow.errors import InvalidArgumentError

DEFAULT_QUEUE = "default"

#: The lane of groups that name none: served by every worker.
UNROUTED = ""

_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")


def check_queue(name: object) -> str:
    """A queue's name: 1-100 letters, digits, ``_ . : -`` (no ``/``: it ends the queue's
    part of a lane)."""
    if not isinstance(name, str) or not _QUEUE_NAME.fullmatch(name):
        raise InvalidArgumentError(
            f"a queue name is 1-100 letters, digits, '_', '.', ':' or '-' "
            f"(starting with a letter or digit), not {name!r}"
        )
    return name


def check_queues(names: object) -> tuple[str, ...] | None:
    """The queues a worker serves: None (every queue of its workflows) or a non-empty list."""
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise InvalidArgumentError(f"queues must be a list of queue names, not {names!r}")
    checked = tuple(dict.fromkeys(check_queue(name) for name in names))
    if not checked:
        raise InvalidArgumentError("queues must name at least one queue (None: all of them)")
    return checked


def lane(queue: str, workflow: str) -> str:
    """The lane of the executions of ``workflow`` in ``queue``."""
    return f"{queue}/{workflow}"


def lane_parts(lane_name: str) -> tuple[str, str] | None:
    """The queue and the workflow of a lane (None for the unrouted lane)."""
    queue, sep, workflow = lane_name.partition("/")
    return (queue, workflow) if sep else None


def served_lanes(
    workflows: Iterable[tuple[str, str]], queues: Sequence[str] | None
) -> tuple[str, ...]:
    """The lanes a worker claims: ``(queue, workflow)`` of each workflow it registers,
    those of the ``queues`` it serves (None: every queue), and the unrouted lane."""
    routed = sorted(lane(q, name) for q, name in workflows if queues is None or q in queues)
    return (UNROUTED, *routed)
