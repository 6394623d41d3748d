"""A workflow that writes a durable stream at a steady pace, for the fault tests of
streams (tests/integration/test_streams_cluster.py). Worker processes import this module:
``raftflow worker tests.apps.streams:engine --url ...``."""

from __future__ import annotations

import time

from raftflow import Engine

engine = Engine()

KEY = "numbers"
#: Each value waits this long in a step first: the writes span the faults.
PACE = 0.05


@engine.step
def tick(i: int) -> int:
    time.sleep(PACE)
    return i


@engine.workflow
def produce(n: int) -> int:
    """Wait for "start", then write 0 .. n-1 to the stream, each after a step, and close it."""
    engine.recv("start", timeout=120)
    for i in range(n):
        engine.write_stream(KEY, tick(i))
    engine.close_stream(KEY)
    return n
