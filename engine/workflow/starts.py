"""A workflow's start settings: what a start applies besides its input and its lane.

``@engine.workflow(timeout=..., concurrency=..., concurrency_key=...)`` and
``engine.limit_queue(queue, concurrency=...)`` decide them; the app's engine applies them
at each start (:meth:`~raftflow.Engine.start`). A :class:`~raftflow.Client` has no code:
the workers publish their workflows' settings with each beat (``workers.starts``,
migration 16) and a start by name applies the settings of the version it routes to, the
same way (engine/client/routing.py). A queue's rate (``limit_queue(rate=...)``) is not
among them: the workers that claim apply it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pydantic
from raftflow.engine.workflow.keys import user_key

from raftflow.errors import InvalidArgumentError


class StartSettings(pydantic.BaseModel):
    """What a start of one workflow at one version applies (its JSON: what workers
    publish; a field left out has its default)."""

    model_config = pydantic.ConfigDict(extra="ignore", frozen=True)

    #: Seconds after its start when a still-running execution is cancelled (None: never).
    timeout: float | None = pydantic.Field(default=None, gt=0)
    #: The workflow's own concurrency limit: at most so many admitted at once.
    concurrency: int | None = pydantic.Field(default=None, ge=1)
    #: Its slots are per ``concurrency_key(input)`` (a function of the input).
    keyed: bool = False
    #: Its queue's concurrency limit (``limit_queue``), when it has none of its own.
    queue_slots: int | None = pydantic.Field(default=None, ge=1)

    def limit(
        self, workflow: str, queue: str, key: Callable[[], object] | None
    ) -> tuple[str, int] | None:
        """The limit key and slots of a start (None: no limit): the workflow's own --
        ``workflow``, or ``"workflow:<key()>"`` when keyed -- else its queue's
        (``"queue:<queue>"``). ``key`` gives the concurrency key of the start's input."""
        if self.concurrency is not None:
            if not self.keyed:
                return workflow, self.concurrency
            if key is None:
                raise InvalidArgumentError(
                    f"workflow {workflow!r} limits its executions per concurrency key (a "
                    "function of its input, which only its code can compute): give the "
                    "start's key, concurrency_key=... (raftflow start --concurrency-key)"
                )
            what = f"concurrency_key of workflow {workflow!r}"
            return user_key(what, "the input", workflow, key), self.concurrency
        if self.queue_slots is not None:
            return f"queue:{queue}", self.queue_slots
        return None


DEFAULTS = StartSettings()


class Publication(pydantic.BaseModel):
    """A worker's ``workers.starts``: its version, and the settings of each lane it runs
    at that version that has any (a lane left out has none: the defaults)."""

    model_config = pydantic.ConfigDict(extra="ignore", frozen=True)

    version: str
    lanes: dict[str, StartSettings] = {}

    def settings(self, lane: str) -> StartSettings:
        """The settings of ``lane`` (a lane of this worker's version)."""
        return self.lanes.get(lane, DEFAULTS)


def publication(version: str, settings: Mapping[str, StartSettings]) -> str:
    """The JSON a worker of ``version`` publishes for the ``settings`` of its lanes."""
    published = Publication(
        version=version,
        lanes={lane: s for lane, s in sorted(settings.items()) if s != DEFAULTS},
    )
    return published.model_dump_json(exclude_defaults=True)


def read_publication(text: str | None) -> Publication | None:
    """A worker's published settings; None for a worker that publishes none (a release
    before them) or something this release cannot read (ignored rather than misapplied)."""
    if text is None:
        return None
    try:
        return Publication.model_validate_json(text)
    except pydantic.ValidationError:
        return None
