"""Named queues and the lanes they route by.

A workflow belongs to one queue (``@engine.workflow(queue="billing")``; ``"default"``
when unnamed). Its executions' events travel in the lane ``"<queue>/<workflow>"``
(transports/lanes.py): a worker claims only the lanes of the workflows it registers, in
the queues it serves, so an execution is never leased to a worker that cannot run it.
An execution is also pinned to the version of the code that started it
(engine/workflow/versions.py): its lane is ``"<queue>/<workflow>@<version>"``, and a worker
claims the lanes of its own version (and, told to adopt, those of versions no live worker
serves). A cron schedule's group has the lane ``"<queue>/<workflow>"``: any version fires it.
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


def lane(queue: str, workflow: str, version: str | None = None) -> str:
    """The lane of the executions of ``workflow`` in ``queue`` started by code of
    ``version`` (``"<queue>/<workflow>@<version>"``); without a version, the lane of the
    workflow's cron schedule, which any version fires."""
    return f"{queue}/{workflow}" if version is None else f"{queue}/{workflow}@{version}"


def lane_parts(lane_name: str) -> tuple[str, str, str | None] | None:
    """The queue, the workflow and the version of a lane (None for the unrouted lane)."""
    queue, sep, rest = lane_name.partition("/")
    if not sep:
        return None
    workflow, at, version = rest.rpartition("@")
    return (queue, workflow, version) if at else (queue, rest, None)


def served_lanes(
    workflows: Iterable[tuple[str, str]],
    queues: Sequence[str] | None,
    versions: Sequence[str],
    scheduled: Iterable[str] = (),
) -> tuple[str, ...]:
    """The lanes a worker claims: for each ``(queue, workflow)`` it registers in the
    ``queues`` it serves (None: every queue), the lane of each of ``versions``, and that of
    its cron schedule if it is ``scheduled``; and the unrouted lane."""
    served = [(q, name) for q, name in workflows if queues is None or q in queues]
    schedules = set(scheduled)
    routed = {lane(q, name, v) for q, name in served for v in versions}
    routed |= {lane(q, name) for q, name in served if name in schedules}
    return (UNROUTED, *sorted(routed))
