"""Each feature check of the simulator (tests/sim/invariants_more.py, tests/sim/shards.py)
catches the bug it is for: the bug is planted for one seed at a time (patched for the
test), and some seed of a small budget must report it as that violation -- not only as
something else going wrong."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from raftflow.engine.runtime.run import WorkerRun
from raftflow.engine.shards.deployment import Shards
from raftflow.engine.workflow import drivers as drivers_module
from raftflow.engine.workflow.activation import Activation
from raftflow.engine.workflow.schedule import Schedule
from raftflow.stores import outbox
from raftflow.stores.flows import StoreFlows
from raftflow.transports.db.flow import Request, Statement

from tests.sim.sim import run_seed

#: Seeds a planted bug must be caught within.
BUDGET = 120


def _early_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start sets a workflow's deadline a second early."""
    original = StoreFlows.start

    def start(self: Any, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        return original(self, *args, timeout=None if timeout is None else timeout - 1, **kwargs)

    monkeypatch.setattr(StoreFlows, "start", start)


def _early_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """An async step is cut at half its timeout."""
    original = drivers_module._timed

    async def timed(awaitable: Any, timeout: float | None, name: str) -> Any:
        return await original(awaitable, None if timeout is None else timeout / 2, name)

    monkeypatch.setattr(drivers_module, "_timed", timed)


def _continue_drops_its_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """continue_as_new's commit loses the run's last step record."""
    original = Activation.continue_commit

    def continue_commit(self: Activation, input_json: str) -> Any:
        self.staged = None
        return original(self, input_json)

    monkeypatch.setattr(Activation, "continue_commit", continue_commit)


def _fold_keeps_the_first_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """A debounced start folds in with the first start's input, not its own."""
    original = StoreFlows.start
    first: dict[str, Any] = {}

    def start(self: Any, execution_id: str, workflow: str, input: Any, *a: Any, **k: Any) -> Any:
        if k.get("debounce") is not None:
            input = first.setdefault(execution_id, input)
        return original(self, execution_id, workflow, input, *a, **k)

    monkeypatch.setattr(StoreFlows, "start", start)


def _resume_forgets_the_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume deletes the execution's records: its earlier steps run again."""
    original = StoreFlows.resume

    def resume(self: Any, execution_id: str, event: Any) -> Any:
        forget = Statement("plant", "DELETE FROM steps WHERE execution_id = ?", (execution_id,))
        yield Request((forget,))
        return (yield from original(self, execution_id, event))

    monkeypatch.setattr(StoreFlows, "resume", resume)


def _fork_copies_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork copies no record: the fork runs its first steps again."""
    original = StoreFlows.fork

    def fork(self: Any, source: str, from_step: int, *args: Any) -> Any:
        return original(self, source, 0, *args)

    monkeypatch.setattr(StoreFlows, "fork", fork)


def _schedule_skips_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schedule parks one time too far, and starts only the latest due time."""
    due, next_after = Schedule.due, Schedule.next_after

    def latest(self: Schedule, since: float, now: float) -> tuple[list[float], bool]:
        return due(self, since, now)[0][-1:], False

    monkeypatch.setattr(Schedule, "due", latest)
    monkeypatch.setattr(Schedule, "next_after", lambda self, now: next_after(self, now + 3))


def _adoption_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker handed an execution at its start does not run it (its lease lapses)."""
    monkeypatch.setattr(WorkerRun, "_adopt", lambda self, claimed: self.unreserve())


def _outbox_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay applies each notice on its target's cluster, and never deletes it."""

    def delivered(notice: Any) -> Any:
        return (yield from ())

    monkeypatch.setattr(outbox, "delivered", delivered)


def _child_outcome_garbled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay records a child's outcome elsewhere with another output."""
    original = outbox.child_finished

    def child_finished(clock: Any, notice: outbox.Notice) -> Any:
        payload = {**(notice.payload or {}), "output": "[0]"}
        return original(clock, replace(notice, payload=payload))

    monkeypatch.setattr(outbox, "child_finished", child_finished)


def _children_stay_home(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit child id is routed to the deployment's first cluster, whatever it is."""
    original = Shards.of

    def of(self: Shards, execution_id: str) -> Any:
        return self.shards[0] if "-c" in execution_id else original(self, execution_id)

    monkeypatch.setattr(Shards, "of", of)


PLANTS: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], str]] = {
    "timeout-early": (_early_deadline, "timeout"),
    "step-cut-early": (_early_cut, "cut by its 0.4s timeout after"),
    "continue-loses-a-record": (_continue_drops_its_record, "recorded []"),
    "debounce-keeps-first-input": (_fold_keeps_the_first_input, "acknowledged before its claim"),
    "resume-reruns": (_resume_forgets_the_records, "ran again after the resume"),
    "fork-copies-nothing": (_fork_copies_nothing, "copied, yet ran"),
    "schedule-skips": (_schedule_skips_a_time, "a time skipped"),
    "fast-path-drops": (_adoption_dropped, "started leased to"),
    # Sharded seeds (tests/sim/shards.py):
    "outbox-kept": (_outbox_kept, "not delivered"),
    "child-outcome-garbled": (_child_outcome_garbled, "from its child"),
    "children-stay-home": (_children_stay_home, "its id routes to"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_bug_is_caught_as_its_violation(
    plant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    install, expected = PLANTS[plant]
    install(monkeypatch)
    seen: list[str] = []
    for seed in range(BUDGET):
        violations = run_seed(seed).violations
        if any(expected in v for v in violations):
            print(f"\n{plant}: caught by seed {seed}: {violations[0]}")
            return
        seen += violations[:1]
    pytest.fail(f"{plant}: no seed of 0..{BUDGET - 1} reported {expected!r}; seen {seen[:5]}")
