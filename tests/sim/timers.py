"""What each timer of a simulated run was set and honoured against, for the timer checks.

A wake time is set as the setter's latest estimate of the cluster's clock plus the delay,
and honoured once the honouring worker's earliest estimate reaches it: with sound bounds
it never comes early on the reference those estimates follow. The reference itself may
move, though, and that is the only slack a timer is allowed: a new leader's clock may be
off the old one's (a worker follows the leader it last synced with), and a worker's local
clock may jump between its syncs (which Linux's monotonic clock does not do; the simulator
does it anyway). So for every timer the probe records, when it is set and when it is
honoured, how far the reference that worker's clock follows is from the true time:

    reference = the leader's offset when it answered the sync in use
                + how far the worker's local clock jumped since that answer

and a timer honoured at ``t1`` that was set at ``t0`` for ``delay`` seconds may fire no
earlier than ``t0 + delay - max(0, reference(t1) - reference(t0))``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from raftflow.engine.runtime.dispatch import Dispatcher
from raftflow.engine.runtime.host import RunHost
from raftflow.engine.workflow.activation import Activation

from tests.sim.cluster import PROCESS


@dataclass(frozen=True)
class Reading:
    """A timer set or honoured: when, where, and the reference the clock followed then."""

    at: float
    process: str
    deadline: float
    reference: float


class TimerProbe:
    """Records the wake times set (``after``) and honoured (``passed``/``remaining``)."""

    def __init__(
        self,
        time: Callable[[], float],
        answers: dict[float, tuple[float, float]],
        local_offset: Callable[[str, float], float],
    ) -> None:
        self.time = time
        #: The cluster's clock answers: value -> (when, the leader's offset then).
        self.answers = answers
        #: A process's local clock less the true time, at a simulated time.
        self.local_offset = local_offset
        self.sets: dict[tuple[str, float], Reading] = {}
        #: The last timer honoured per (process, execution): what a step run next waited for.
        self.honoured: dict[tuple[str, str], Reading] = {}
        #: Each execution's deadline (its workflow's timeout) first found passed, and by whom.
        self.deadlines: dict[str, Reading] = {}
        #: Each worker process's last ``clock_earliest`` reading (the dispatcher's deadline check).
        self._earliest: dict[str, Reading] = {}

    def moved(self, before: float | None, after: float | None) -> float:
        """How far the reference moved forward between two readings (0 if unknown)."""
        if before is None or after is None:
            return 0.0
        return max(0.0, after - before)

    def deadline_slack(self, execution_id: str, set_reference: float | None) -> float:
        """How early an execution's timeout may legitimately have cancelled it: how far the
        reference moved from its start (``set_reference``) to the deadline's honouring."""
        honoured = self.deadlines.get(execution_id)
        return self.moved(set_reference, None if honoured is None else honoured.reference)

    def reference(self, clock: Any, process: str) -> float | None:
        """How far the reference ``clock`` (a ClusterClock) follows is off the true time."""
        anchor = getattr(clock, "_anchor", None) if clock is not None else None
        answer = None if anchor is None else self.answers.get(anchor[0])
        if answer is None:
            return None
        answered_at, leader_offset = answer
        now = self.time()
        return (
            leader_offset
            + self.local_offset(process, now)
            - self.local_offset(process, answered_at)
        )

    def _reading(self, run: Activation, deadline: float) -> Reading | None:
        process = PROCESS.get()
        reference = self.reference(run.host.store.clock, process)
        if reference is None:
            return None
        return Reading(self.time(), process, deadline, reference)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Wrap the activation's timer methods (whatever they are now: a planted bug's too)."""
        cls = Activation
        saved = (cls.after, cls.passed, cls.remaining)
        after, passed, remaining = saved
        probe = self

        def after_(run: Activation, seconds: float, *, now: float | None = None) -> float:
            deadline: float = after(run, seconds, now=now)
            reading = probe._reading(run, deadline)
            if reading is not None:
                probe.sets.setdefault((run.execution_id, deadline), reading)
            return deadline

        def honour(run: Activation, deadline: float) -> Reading | None:
            reading = probe._reading(run, deadline)
            if reading is not None:
                probe.honoured[(reading.process, run.execution_id)] = reading
            return reading

        def passed_(run: Activation, deadline: float) -> bool:
            done: bool = passed(run, deadline)
            if done:
                reading = honour(run, deadline)
                if reading is not None and deadline == run.record.deadline:
                    probe.deadlines.setdefault(run.execution_id, reading)
            return done

        def remaining_(run: Activation, deadline: float) -> float:
            left: float = remaining(run, deadline)
            if left <= 0:
                honour(run, deadline)
            return left

        # The dispatcher checks a deadline between turns on its own (a claimed event past
        # it): the host's earliest reading, then a cancel with reason "timeout".
        earliest, cancel = RunHost.clock_earliest, Dispatcher._cancel

        def earliest_(host: Any) -> float:
            value: float = earliest(host)
            process = PROCESS.get()
            reference = probe.reference(host.store.clock, process)
            if reference is not None:
                probe._earliest[process] = Reading(probe.time(), process, value, reference)
            return value

        async def cancel_(dispatcher: Any, lease: Any, reason: str) -> None:
            reading = probe._earliest.get(PROCESS.get())
            if reason == "timeout" and reading is not None:
                probe.deadlines.setdefault(lease.group_id, reading)
            await cancel(dispatcher, lease, reason)

        cls.after, cls.passed, cls.remaining = after_, passed_, remaining_  # type: ignore[method-assign]
        RunHost.clock_earliest, Dispatcher._cancel = earliest_, cancel_  # type: ignore[method-assign]
        try:
            yield
        finally:
            cls.after, cls.passed, cls.remaining = saved  # type: ignore[method-assign]
            RunHost.clock_earliest, Dispatcher._cancel = earliest, cancel  # type: ignore[method-assign]

    def slack(self, execution_id: str, honoured: Reading | None, wake_at: float | None) -> float:
        """How early the timer ``honoured`` (the one a run waited for) may legitimately
        have fired: how far the reference moved between its setting and its honouring. 0
        if the run waited for no timer, or not for ``wake_at`` (when given)."""
        if honoured is None or (wake_at is not None and honoured.deadline != wake_at):
            return 0.0
        set_ = self.sets.get((execution_id, honoured.deadline))
        if set_ is None:
            return 0.0
        return max(0.0, honoured.reference - set_.reference)
