"""Lanes: what a consumer must serve to claim a group.

A group's lane is set by its first message, like its priority (a publish names it, or the
engine's execution of that id carries it); ``""`` is the lane of a group whose first
message named none. A claim that names lanes takes only groups of those lanes
(``claim_served``, transports/queue.sql); one that names none takes any group.
"""

from __future__ import annotations

from collections.abc import Sequence

from raftflow.transports.payload import MAX_ID_LENGTH, check_id, to_json

from raftflow.errors import InvalidArgumentError

#: Upper bound of the lanes one claim may name (each costs it one indexed range per priority).
MAX_LANES = 1000

#: Upper bound of a lane's length (a queue's name and a workflow's, for the engine).
MAX_LANE_LENGTH = 2 * MAX_ID_LENGTH

#: The lanes a claim serves: a sequence of lane names, or None for every lane.
Lanes = Sequence[str] | None


def check_lane(lane: object) -> str:
    """A lane: ``""`` or an id-like string of at most :data:`MAX_LANE_LENGTH` characters."""
    if lane == "":
        return ""
    return check_id(lane, what="lane", limit=MAX_LANE_LENGTH)


def lanes_param(lanes: Lanes) -> str | None:
    """The ``:lanes`` parameter of a served claim (a JSON array), or None for every lane.
    A group's lane is set by its first publish; ``""`` is the lane of a publish that names
    none."""
    if lanes is None:
        return None
    if isinstance(lanes, str) or not isinstance(lanes, Sequence):
        raise InvalidArgumentError(f"lanes must be a sequence of str or None, not {lanes!r}")
    if len(lanes) > MAX_LANES:
        raise InvalidArgumentError(f"a claim serves at most {MAX_LANES} lanes, not {len(lanes)}")
    for lane in lanes:
        check_lane(lane)
    return to_json(sorted(set(lanes)), what="lanes")
