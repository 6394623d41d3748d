"""What each lane holds and which live workers serve it (``raftflow queue``).

A lane is what a worker must serve to claim a group (transports/lanes.py): for the engine,
a queue and a workflow. A lane that no live worker serves still holds its executions:
they wait, visibly, until a worker that serves it starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from raftflow.transports.db.catalogue import load
from raftflow.transports.db.clock import Clock
from raftflow.transports.db.flow import Flow, Request
from raftflow.transports.payload import from_json

QUERIES = load("raftflow.stores", "lanes.sql", "lanes")

#: Lanes listed at most (the busiest installations have a few hundred workflows).
MAX_LANES_LISTED = 10_000

#: A worker is live if its last beat is this recent (seconds).
LIVE_WITHIN = 60.0


#: Executions (and groups) moved per request by a promote.
PROMOTE_BATCH = 500


@dataclass(frozen=True, slots=True)
class LaneDepth:
    """One lane: what waits in it, and how many live workers serve it."""

    lane: str
    groups: int  # executions (and schedules) with an event queued: leased, parked or not
    ready: int  # claimable now
    leased: int  # being run now
    oldest_ready_age: float | None  # seconds the oldest claimable one has waited
    workers: int  # live workers that serve it
    serving: tuple[str, ...] = ()  # their ids (a sharded deployment's views count each once)


def serves(lanes: Sequence[str] | None, lane: str) -> bool:
    """Whether a worker that serves ``lanes`` (None: every lane) claims ``lane``."""
    return lanes is None or lane in lanes


class LaneFlows:
    """The reads of lanes, one request each."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def depths(self) -> Flow[list[LaneDepth]]:
        """Every lane that holds a group, with the live workers that serve it (a ``weak``
        read: no Raft entry, for the dashboard's refreshes too)."""
        now = yield from self.clock.now()
        response = yield Request(
            (
                QUERIES("lane_depth", {"now": now, "limit": MAX_LANES_LISTED}),
                QUERIES("serving_workers", {"since": now - LIVE_WITHIN}),
            ),
            level="weak",
        )
        response.raise_for_errors()
        served = {str(row["worker_id"]): lanes_of(row["lanes"]) for row in response[1].dicts()}
        depths = []
        for row in response[0].dicts():
            serving = tuple(w for w, lanes in served.items() if serves(lanes, row["lane"]))
            oldest = row["oldest_ready"]
            depths.append(
                LaneDepth(
                    lane=row["lane"],
                    groups=int(row["groups"]),
                    ready=int(row["ready"] or 0),
                    leased=int(row["leased"] or 0),
                    oldest_ready_age=None if oldest is None else max(0.0, now - float(oldest)),
                    workers=len(serving),
                    serving=serving,
                )
            )
        return depths

    def present(self, worker_id: str) -> Flow[tuple[list[str], list[str | None]]]:
        """The lanes that hold groups, and every lane the live workers but ``worker_id``
        serve (None for one that serves every lane): what an adopting worker compares."""
        now = yield from self.clock.now()
        response = yield Request(
            (
                QUERIES("present_lanes", {"limit": MAX_LANES_LISTED}),
                QUERIES(
                    "other_workers_lanes", {"since": now - LIVE_WITHIN, "worker_id": worker_id}
                ),
            ),
            level="weak",
        )
        response.raise_for_errors()
        present = [str(row["lane"]) for row in response[0].dicts()]
        served: list[str | None] = []
        for row in response[1].dicts():
            lanes = lanes_of(row["lanes"])
            served.extend([None] if lanes is None else lanes)
        return present, served

    def in_flight(self) -> Flow[tuple[dict[str, int], dict[str, Sequence[str] | None]]]:
        """Unfinished executions per lane, and the lanes of each live worker by its id
        (None: every lane): what ``raftflow versions`` shows."""
        now = yield from self.clock.now()
        response = yield Request(
            (
                QUERIES("in_flight_by_lane"),
                QUERIES("serving_workers", {"since": now - LIVE_WITHIN}),
            ),
            level="strong",
        )
        response.raise_for_errors()
        counts = {str(row["lane"] or ""): int(row["executions"]) for row in response[0].dicts()}
        return counts, {
            str(row["worker_id"]): lanes_of(row["lanes"]) for row in response[1].dicts()
        }

    def promote(self, old: str, new: str) -> Flow[int]:
        """Move the unfinished executions of version ``old`` (and their queued events) to
        version ``new``, in batches; how many executions moved."""
        moved = 0
        params = {"old": old, "new": new, "batch": PROMOTE_BATCH}
        while True:
            response = yield Request(
                (QUERIES("promote_executions", params), QUERIES("promote_groups", params)),
                transaction=True,
            )
            response.raise_for_errors()
            moved += response[0].rows_affected
            if response[0].rows_affected == 0 and response[1].rows_affected == 0:
                return moved


def lanes_of(text: str | None) -> Sequence[str] | None:
    """A worker row's ``lanes`` (None: every lane)."""
    if text is None:
        return None
    value = from_json(text)
    return [str(lane) for lane in value] if isinstance(value, list) else None
