"""The events of an execution: every unit of work is one message in its queue group.

The queue delivers an execution's events one at a time, in order, to one worker at a time,
so anything that must be ordered with the steps -- later a signal, a cancellation, a timer
-- is one more kind of event here, not a mechanism beside the queue. A worker that meets
an event it does not know parks it for inspection instead of crashing on it.
"""

from __future__ import annotations

from typing import Any, Literal

import pydantic
from raftflow.transports.payload import to_json


class RunEvent(pydantic.BaseModel):
    """Run the execution forward from its recorded steps (start, and after each step)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    kind: Literal["run"] = "run"


# One kind so far; the next kinds join as ``Annotated[RunEvent | SignalEvent | ...,
# pydantic.Field(discriminator="kind")]``.
Event = RunEvent

_EVENT = pydantic.TypeAdapter(Event)

#: A run event, as a value (``start`` publishes it) and as JSON text (each step's commit).
RUN = RunEvent().model_dump(mode="json")
RUN_TEXT = to_json(RUN, what="event")


def parse_event(value: Any) -> RunEvent | None:
    """The event in a message, or None when it is not one this version knows."""
    try:
        return _EVENT.validate_python(value)
    except pydantic.ValidationError:
        return None
