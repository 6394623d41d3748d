"""Workflows for the sharded deployments' tests: a parent that starts children whose ids
route to other clusters (its outcome needs theirs, relayed through the outbox), and sends
to an execution elsewhere. Worker processes import it:
``raftflow worker tests.apps.families:engine --url 'A;B'``."""

from __future__ import annotations

import time
from typing import Any

from raftflow import Engine

engine = Engine()


@engine.step
def square(n: int) -> int:
    time.sleep(0.3)  # long enough that workers are killed while families run
    return n * n


@engine.workflow
def child(n: int) -> int:
    return square(n) + square(1)


@engine.workflow
def parent(job: dict[str, Any]) -> int:
    """The sum of its children's results: each child's id is one of ``job["children"]``
    (on any cluster), each waited for in turn."""
    handles = [
        engine.start(child, n, execution_id=child_id) for n, child_id in enumerate(job["children"])
    ]
    return sum(handle.result() for handle in handles)


def expected(children: int) -> int:
    return sum(n * n + 1 for n in range(children))
