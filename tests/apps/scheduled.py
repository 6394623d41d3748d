"""A scheduled workflow for the schedule tests: every second, cluster-wide. Worker
processes import it: ``raftflow worker tests.apps.scheduled:engine --url ...``."""

from __future__ import annotations

from datetime import datetime

from raftflow import Engine

engine = Engine()


@engine.step
def stamp(at: str) -> str:
    return at


@engine.scheduled("* * * * * *", catch_up=100)
@engine.workflow
def tick(at: datetime) -> str:
    return stamp(at.isoformat())
