"""The simulation's logs and its quiet end: the engine's log records go into the trace (a
lease the heartbeat dropped is checked there), and killed workers' coroutines, collected
after the run, say nothing."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.sim.sim import Simulation


class _Capture(logging.Handler):
    """The engine's warnings, into the trace; a lease the heartbeat dropped is checked."""

    def __init__(self, sim: Simulation) -> None:
        super().__init__(logging.INFO)
        self.sim = sim

    def emit(self, record: logging.LogRecord) -> None:
        sim = self.sim
        message = record.getMessage().split("\n")[0][:160]
        sim.note(f"log {record.levelname.lower()}: {message}")
        if "lease lost during a step" in record.msg and record.args:
            sim.check_dropped_lease(str(record.args[0]))  # type: ignore[index]


@contextlib.contextmanager
def captured_logs(sim: Simulation) -> Iterator[None]:
    """The engine's log records, into ``sim``'s trace, while the run lasts."""
    logger = logging.getLogger("raftflow")
    handler = _Capture(sim)
    saved = (logger.level, logger.propagate)
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def quiet_unraisable(hook: Any) -> Any:
    """Killed workers' coroutines, collected later, complain that they ignored their
    GeneratorExit (they wait forever by design): keep those quiet, pass the rest on."""
    if getattr(hook, "sim_quiet", False):
        return hook

    def quiet(unraisable: Any) -> None:
        if "GeneratorExit" not in str(unraisable.exc_value):
            hook(unraisable)

    quiet.sim_quiet = True  # type: ignore[attr-defined]
    return quiet
