"""An app whose queue and state are two SQLite files (``SPLIT_QUEUE``, ``SPLIT_STATE``), for
the split pair's process tests. ``python -m tests.apps.split_pair`` runs a worker on it;
with ``SPLIT_CRASH=1`` the worker kills itself (SIGKILL) right after its first commit that
ends a turn, before the queue hears of it: the window between the pair's two writes.

Each run of a step appends a line to ``<log_dir>/<execution>-<index>`` (the test counts
the runs of each step)."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from raftflow.stores import split
from raftflow.stores.store import SqlStore
from raftflow.transports.transport import SqlTransport

from raftflow import Engine, current_step

engine = Engine(
    transport=SqlTransport.from_url(os.environ["SPLIT_QUEUE"]),
    store=SqlStore.from_url(os.environ["SPLIT_STATE"]),
)


@engine.step
def logged(log_dir: str, index: int) -> int:
    info = current_step()
    assert info is not None
    with open(Path(log_dir) / f"{info.execution_id}-{index}", "a") as log:
        log.write(f"{os.getpid()}\n")
    return index * 10


@engine.workflow
def steps_around_a_park(log_dir: str) -> list[int]:
    """A step, a durable sleep that parks the execution (ending the turn), two steps."""
    first = logged(log_dir, 0)
    engine.sleep(1.2)
    return [first, logged(log_dir, 1), logged(log_dir, 2)]


def _crash_after_the_commit() -> None:
    publish = split.publish

    def crashing(queue: Any, rows: Sequence[Any], acks: Sequence[Any]) -> Any:
        if acks:  # a turn's commit applied in the store; its event still leased
            os.kill(os.getpid(), signal.SIGKILL)
        return publish(queue, rows, acks)

    split.publish = crashing  # type: ignore[assignment]


if __name__ == "__main__":
    if os.environ.get("SPLIT_CRASH") == "1":
        _crash_after_the_commit()
    print("split worker started", flush=True)
    engine.run_worker(concurrency=4, visibility=1.0)
