"""Tests only, never installed: makes a worker process's clock jump at runtime.

``tests/chaos/test_clock_jumps.py`` starts one worker with this folder first on its
``PYTHONPATH`` and ``RAFTFLOW_TEST_CLOCK_OFFSET_FILE`` naming a file of seconds. Python
imports this module at start-up; it gives every :class:`ClusterClock` created without a
``local_time`` of its own ``time.monotonic`` plus the number in that file, read at every
reading (a missing or unreadable file counts as 0). The product's clock has no such hook.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

OFFSET_FILE_ENV = "RAFTFLOW_TEST_CLOCK_OFFSET_FILE"


def _install(path: str) -> None:
    from raftflow.transports.db.clock import ClusterClock

    def shifted() -> float:
        try:
            with open(path) as file:
                offset = float(file.read().strip() or 0.0)
        except (OSError, ValueError):
            offset = 0.0
        return time.monotonic() + offset

    original = ClusterClock.__init__

    def init(self: ClusterClock, *args: Any, local_time: Any = None, **options: Any) -> None:
        original(self, *args, local_time=local_time or shifted, **options)

    ClusterClock.__init__ = init  # type: ignore[method-assign]
    print(f"test clock: local time shifted by the seconds in {path}", file=sys.stderr, flush=True)


if os.environ.get(OFFSET_FILE_ENV):
    _install(os.environ[OFFSET_FILE_ENV])
