"""Which lane a start by name (:class:`~raftflow.Client`) puts its execution in.

A client has no workflow code, hence no version of its own: an execution it starts goes
to the lane ``"<queue>/<workflow>@<version>"`` of the version that the running workers
serving ``(queue, workflow)`` run (engine/workflow/queues.py), read from the lanes each
worker's beat writes (``workers.lanes``) in one read just before the start.

- Each running worker (beat within a minute, not draining) counts once, for its own
  version: of the versions it serves ``(queue, workflow)`` at, the one it serves the most
  lanes at (a worker serves every workflow it registers at its own version, and only some
  at the versions it adopts, ``--adopt-older``).
- The version most workers count for wins; a tie goes to the version of the most
  recently started worker (a deploy rolling forward), then to the greater version name.
- No running worker serves ``(queue, workflow)`` while some report their lanes: the start
  is refused (:class:`~raftflow.errors.UnknownWorkflowError`), nothing is written.
- No running worker reports lanes (none is running, or only workers of a release before
  lanes): the database cannot tell, and the execution is started in the unrouted lane
  ``""``, which every worker claims. It waits there, visibly (``raftflow queue``), until a
  worker that registers the workflow takes it.

The same read gives the start settings of the chosen lane (engine/workflow/starts.py): those
that the most recently started running worker serving it at its own version publishes.
None (nothing to apply) when no such worker publishes any (a release before them), or the
lane is the unrouted one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raftflow.engine.workflow.queues import DEFAULT_QUEUE, UNROUTED, lane, lane_parts
from raftflow.engine.workflow.starts import Publication, StartSettings, read_publication
from raftflow.stores.lanes import LIVE_WITHIN, lanes_of
from raftflow.stores.rows import read
from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request

from raftflow.errors import ExecutionNotFoundError, UnknownWorkflowError

SQL = load("raftflow.stores", "routes.sql", "routes")

#: Workflows named at most in the error of a start that no worker serves.
NAMED_IN_ERROR = 10


@dataclass(frozen=True, slots=True)
class RunningWorker:
    """A running worker as a start by name sees it."""

    lanes: Sequence[str] | None  # None: a worker of a release before lanes
    started_at: float
    starts: Publication | None = None  # None: a worker of a release before start settings


@dataclass(frozen=True, slots=True)
class Route:
    """Where a start by name goes, and what it applies there."""

    lane: str
    settings: StartSettings | None  # None: unknown (nothing applied)


def chosen_settings(lane_name: str, workers: Sequence[RunningWorker]) -> StartSettings | None:
    """The settings of ``lane_name`` as the newest running worker that serves it at its own
    version publishes them."""
    parts = lane_parts(lane_name)
    version = None if parts is None else parts[2]
    publishing = [
        (w.started_at, w.starts)
        for w in workers
        if w.starts is not None and w.starts.version == version and lane_name in (w.lanes or ())
    ]
    if not publishing:
        return None
    return max(publishing, key=lambda found: found[0])[1].settings(lane_name)


def choose_lane(queue: str, workflow: str, workers: Sequence[RunningWorker]) -> str:
    """The lane of a start of ``workflow`` in ``queue`` (the rules: this module's doc)."""
    reporting = [w for w in workers if w.lanes is not None]
    if not reporting:
        return UNROUTED
    votes: Counter[str] = Counter()
    newest: dict[str, float] = {}
    for worker in reporting:
        version = _own_version(queue, workflow, worker.lanes or ())
        if version is not None:
            votes[version] += 1
            newest[version] = max(newest.get(version, worker.started_at), worker.started_at)
    if not votes:
        raise UnknownWorkflowError(_unserved(queue, workflow, reporting))
    chosen = max(votes, key=lambda v: (votes[v], newest[v], v))
    return lane(queue, workflow, chosen)


def _own_version(queue: str, workflow: str, lanes: Sequence[str]) -> str | None:
    """The version a worker serving ``lanes`` runs ``(queue, workflow)`` at, if it does."""
    per_version: Counter[str] = Counter()
    serving: set[str] = set()
    for name in lanes:
        parts = lane_parts(name)
        if parts is None or parts[2] is None:
            continue
        per_version[parts[2]] += 1
        if parts[:2] == (queue, workflow):
            serving.add(parts[2])
    if not serving:
        return None
    return max(serving, key=lambda v: (per_version[v], v))


def _unserved(queue: str, workflow: str, workers: Sequence[RunningWorker]) -> str:
    served = sorted(
        {
            f"{parts[1]!r} in {parts[0]!r}"
            for w in workers
            for name in w.lanes or ()
            if (parts := lane_parts(name)) is not None and parts[2] is not None
        }
    )
    shown = ", ".join(served[:NAMED_IN_ERROR]) + (", ..." if len(served) > NAMED_IN_ERROR else "")
    return (
        f"no running worker serves workflow {workflow!r} in queue {queue!r} (they serve "
        f"{shown or 'nothing'}): check the name and the queue, or start a worker that "
        "registers it; nothing was started"
    )


def route(clock: Clock, queue: str, workflow: str) -> Flow[Route]:
    """The lane and settings for a start by name: one ``weak`` read of the running workers
    (no Raft entry), read again at ``strong`` before a refusal is believed (a stale
    leader's answer could miss a worker that just started)."""
    now = yield from clock.now()
    statement = SQL("running_workers", {"since": now - LIVE_WITHIN})
    rows = yield from read(statement)
    try:
        workers = _running(rows)
        chosen = choose_lane(queue, workflow, workers)
    except UnknownWorkflowError:
        response = yield Request((statement,), level="strong")
        workers = _running(response.raise_for_errors()[0].dicts())
        chosen = choose_lane(queue, workflow, workers)
    return Route(chosen, chosen_settings(chosen, workers))


def _running(rows: Sequence[dict[str, Any]]) -> list[RunningWorker]:
    return [
        RunningWorker(
            lanes_of(row["lanes"]), float(row["started_at"]), read_publication(row["starts"])
        )
        for row in rows
    ]


def execution_route(clock: Clock, execution_id: str) -> Flow[str]:
    """The lane ``execution_id``'s workflow has at the version the running workers serve
    (in the execution's queue; the default queue for one started before lanes)."""
    response = yield Request((SQL("execution_lane", {"id": execution_id}),), level="strong")
    row = response.raise_for_errors()[0].first()
    if row is None:
        raise ExecutionNotFoundError(f"no execution has id {execution_id!r}")
    parts = lane_parts(str(row["lane"] or ""))
    queue = parts[0] if parts is not None else DEFAULT_QUEUE
    return (yield from route(clock, queue, str(row["workflow"]))).lane
