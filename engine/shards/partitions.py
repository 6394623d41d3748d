"""Which partition an execution belongs to: a pure function of its id, so routing needs
no lookup.

An execution's **routing key** is its id up to the first ``/`` or ``@`` (the whole id if
it has neither), and its partition a hash of that key modulo the deployment's number of
partitions. What the engine derives from an id shares the id's key, so it lives on the
same cluster: a child's default id is ``"<parent id>/<call>"``, a cron schedule's fire
``"<workflow>@<time>"`` (and the schedule's own queue group is routed by its workflow's
name). Ids that share their first segment share a partition on purpose (``tenant-7/order-1``
and ``tenant-7/order-2`` are on one cluster); ids whose first segment is the same for
everything (``orders/123``) would put everything on one: give such ids a varying first
segment (``order-123``).
"""

from __future__ import annotations

import hashlib
import re

from raftflow.engine.workflow.schedule import SCHEDULE_PREFIX

_KEY_END = re.compile(r"[/@]")


def routing_key(execution_id: str) -> str:
    """The part of ``execution_id`` (or of a queue group's id) that chooses its partition."""
    if execution_id.startswith(SCHEDULE_PREFIX):  # a schedule's group: its workflow's fires
        execution_id = execution_id[len(SCHEDULE_PREFIX) :]
    match = _KEY_END.search(execution_id)
    return execution_id if match is None else execution_id[: match.start()]


def key_route(key: str) -> str:
    """An id that routes where ``key`` (a limit's key: ``"checkout"``, ``"queue:billing"``,
    ``"export:customer-7"``) lives: the cluster that admits, or counts, every execution
    the limit applies to -- so a limit holds across a sharded deployment."""
    return _KEY_END.sub("_", key)


def partition_of(execution_id: str, partitions: int) -> int:
    """The partition (``0 .. partitions - 1``) of ``execution_id``: the same in every
    process, release and platform (a fixed hash, not Python's ``hash``)."""
    digest = hashlib.blake2b(routing_key(execution_id).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partitions
