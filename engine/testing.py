"""Helpers for testing your workflows: virtual time, an in-process engine, step overrides.

:class:`WorkflowTestEnvironment` points your engine at a fresh SQLite database whose clock
is a :class:`VirtualClock`, and runs a worker in the background, in this process. Time
moves only when the test says so: sleeps, ``recv`` timeouts, retry delays, workflow
timeouts and cron ticks all wait on that clock, so a workflow that sleeps for two weeks
finishes in milliseconds::

    from raftflow.engine.testing import WorkflowTestEnvironment

    def test_the_trial_ends_after_two_weeks() -> None:
        with WorkflowTestEnvironment(engine) as env:
            handle = engine.start(trial, "ann")
            assert env.result(handle) == "ended"   # jumps over the sleep
            assert env.step_names(handle) == ["send_welcome", "sleep", "send_trial_ending"]

- ``env.result(handle)``: run until the execution finishes, jumping the clock to the next
  deadline whenever nothing else can run (raises if it waits for something no clock can
  bring, e.g. a signal that nobody sends).
- ``env.advance(seconds)``: move the clock forward, stopping at each deadline on the way
  (each cron tick fires once, in order) and letting the engine settle at each. Cron
  schedules fire only with ``WorkflowTestEnvironment(engine, schedules=True)``.
- ``env.override(step, result=...)`` / ``raises=`` / ``side_effect=``: a step's function
  replaced for the environment's lifetime (mock a payment API).
- ``env.steps(handle)`` / ``env.step_names(handle)``: the recorded calls, for assertions.

It is the real engine on the real embedded backend (same SQL, same semantics), not a stub:
what passes here runs the same on rqlite. Every wait of a workflow takes virtual time,
however short: sleeps, ``recv`` timeouts, retry delays and rate-limit waits park until
their deadline on the virtual clock (on a real clock the engine pauses in place for
waits under a second). Steps themselves run in real time: a step that calls
``time.sleep`` sleeps, and a step's ``timeout=`` is measured in real time.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from raftflow.engine.runtime.schedules import ScheduleFlows
from raftflow.transports.db.flow import Flow

from raftflow.errors import ConfigurationError, ResultTimeoutError

if TYPE_CHECKING:
    from raftflow.engine.app import Engine
    from raftflow.engine.client.handle import WorkflowHandle
    from raftflow.engine.workflow.registry import StepDef
    from raftflow.stores.records import StepRecord

T = TypeVar("T")

#: Where virtual time starts by default: a fixed instant, so tests are reproducible.
EPOCH = datetime.fromisoformat("2030-01-01T00:00:00+00:00")
#: ``env.advance`` reaches deadlines up to this far (seconds) past its target: sums of
#: decimal fractions of a second are not exact at epoch magnitudes (2.4e-7 s apart).
TOLERANCE = 1e-6


class VirtualClock:
    """A clock that moves only when told (:meth:`advance`, :meth:`set`); the engine's
    ``Clock`` (lease deadlines, wake times, cron) when passed as ``clock=``. Under it
    every wait of a workflow parks until its deadline, however short (the engine pauses
    in place for waits under a second on a real clock)."""

    virtual = True  # transports.clock.is_virtual

    def __init__(self, start: datetime | float = EPOCH) -> None:
        self._now = start.timestamp() if isinstance(start, datetime) else float(start)

    def time(self) -> float:
        return self._now

    def current(self) -> datetime:
        return datetime.fromtimestamp(self._now, tz=EPOCH.tzinfo)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ConfigurationError("virtual time never goes back")
        self._now += seconds

    def set(self, when: datetime | float) -> None:
        at = when.timestamp() if isinstance(when, datetime) else float(when)
        self.advance(at - self._now)

    # -- the Clock protocol ---------------------------------------------------------------

    def now(self) -> Flow[float]:
        return self._now
        yield  # pragma: no cover - makes this a generator that never yields

    def estimate(self) -> float:
        return self._now

    def __repr__(self) -> str:
        return f"VirtualClock({self.current().isoformat()})"


class WorkflowTestEnvironment:
    """Your engine on a fresh SQLite database with virtual time and a worker in this
    process, for the ``with`` block (see the module docstring). ``start`` is where virtual
    time begins; ``schedules`` whether the engine's cron schedules fire (off by default:
    a test of one workflow does not want an hourly job in its way); ``path`` the database
    file (a temporary one by default); ``worker`` options go to the worker
    (``concurrency``...). On exit the engine is closed and reconnects to its own URL on
    next use."""

    def __init__(
        self,
        engine: Engine,
        *,
        start: datetime | float = EPOCH,
        schedules: bool = False,
        path: str | Path | None = None,
        settle_timeout: float = 10.0,
        **worker: Any,
    ) -> None:
        self.engine = engine
        self.clock = VirtualClock(start)
        self._schedules = schedules
        self._path = path
        self._settle_timeout = settle_timeout
        self._worker_options = {"poll_interval": 0.002, "max_poll_interval": 0.01, **worker}
        self._stack = ExitStack()

    def __enter__(self) -> WorkflowTestEnvironment:
        stack = self._stack
        if self._path is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="raftflow-test-"))
            self._path = Path(folder) / "test.db"
        saved = (self.engine._url, self.engine._options)
        self.engine.connect(f"sqlite:///{self._path}", clock=self.clock)

        def restore() -> None:
            self.engine.close()
            self.engine._url, self.engine._options = saved

        stack.callback(restore)
        if not self._schedules:  # cron ticks only when the test asks for them
            kept, self.engine.schedules = self.engine.schedules, {}

            def restore_schedules() -> None:
                self.engine.schedules = kept

            stack.callback(restore_schedules)
        else:  # made now, not by the worker's background task: env.advance() sees them
            schedules = list(self.engine.schedules.values())
            self.engine.store.run(ScheduleFlows(self.clock).ensure(schedules))
        stack.enter_context(self.engine.running_worker(**self._worker_options))
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()

    # -- time -----------------------------------------------------------------------------

    def now(self) -> datetime:
        return self.clock.current()

    def settle(self) -> float | None:
        """Wait (in real time) until nothing can run at the current virtual time: no lease
        held, nothing claimable. Returns the earliest parked deadline, if any."""
        deadline = time.monotonic() + self._settle_timeout
        quiet = 0
        while True:
            transport = self.engine.transport
            leased, next_at = transport.run(transport.flows.idle_state())
            claimable = self.engine.store.run(self.engine.transport.flows.claimable())
            quiet = quiet + 1 if not leased and not claimable else 0
            if quiet >= 2:  # twice in a row: nothing was between two of its requests
                return next_at
            if time.monotonic() > deadline:
                raise ResultTimeoutError(
                    f"the engine did not settle within {self._settle_timeout}s of real time"
                )
            time.sleep(0.003)

    def advance(self, seconds: float) -> None:
        """Move virtual time ``seconds`` forward, stopping at each parked deadline on the
        way so that everything due runs in order (each cron tick once)."""
        target = self.clock.time() + seconds
        while True:
            next_at = self.settle()
            # A deadline within TOLERANCE past the target counts as reached: advance(0.3)
            # then advance(0.1) ends a 0.4 s sleep, whatever the floats' last bits say.
            if next_at is None or next_at > target + TOLERANCE:
                break
            self.clock.set(max(next_at, self.clock.time()))
        self.clock.set(max(target, self.clock.time()))
        self.settle()

    def result(
        self, handle: WorkflowHandle[T], *, within: float | None = None, max_jumps: int = 10_000
    ) -> T:
        """Run until the execution finishes and return its result (or raise its error),
        jumping virtual time to the next deadline whenever nothing else can run; raise
        :class:`ResultTimeoutError` if that would take more than ``within`` virtual
        seconds."""
        limit = None if within is None else self.clock.time() + within
        for _ in range(max_jumps):
            next_at = self.settle()
            if handle.status().is_final:
                return handle.result(timeout=self._settle_timeout)
            if next_at is None:
                raise ResultTimeoutError(
                    f"execution {handle.id} waits for something that no deadline brings "
                    "(a signal nobody sent?)"
                )
            if limit is not None and next_at > limit:
                raise ResultTimeoutError(
                    f"execution {handle.id} still waits after {within} virtual seconds"
                )
            self.clock.set(max(next_at, self.clock.time()))
        raise ResultTimeoutError(f"execution {handle.id} still running after {max_jumps} jumps")

    # -- steps ----------------------------------------------------------------------------

    def override(
        self,
        step: Callable[..., Any] | str,
        *,
        result: Any = None,
        raises: BaseException | None = None,
        side_effect: Callable[..., Any] | None = None,
    ) -> None:
        """Replace a step's function while the environment lasts: return ``result``, raise
        ``raises``, or call ``side_effect`` with the step's arguments. Its records are the
        fake's, like a real step's (retries and ``StepError`` included)."""
        definition = _step_def(self.engine, step)

        def fake(*args: Any, **kwargs: Any) -> Any:
            if raises is not None:
                raise raises
            if side_effect is not None:
                return side_effect(*args, **kwargs)
            return result

        async def afake(*args: Any, **kwargs: Any) -> Any:
            return fake(*args, **kwargs)

        self._stack.enter_context(_replaced(definition, afake if definition.is_async else fake))

    def steps(self, handle: WorkflowHandle[Any]) -> list[StepRecord]:
        return handle.steps()

    def step_names(self, handle: WorkflowHandle[Any]) -> list[str]:
        """The names of the recorded calls in order (``sleep``, ``recv``... for those)."""
        return [record.name for record in handle.steps()]


def _step_def(engine: Engine, step: Callable[..., Any] | str) -> StepDef:
    name = step if isinstance(step, str) else getattr(step, "__raftflow_step__", None)
    definition = engine.registry.steps.get(name) if isinstance(name, str) else None
    if definition is None:
        raise ConfigurationError(f"{step!r} is not a step of this engine (@engine.step)")
    return definition


@contextmanager
def _replaced(definition: StepDef, fn: Callable[..., Any]) -> Iterator[None]:
    original = definition.fn
    object.__setattr__(definition, "fn", fn)  # the frozen definition the wrapper holds
    try:
        yield
    finally:
        object.__setattr__(definition, "fn", original)
