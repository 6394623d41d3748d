"""Versioning a running workflow's code: ``engine.patched`` and ``engine.deprecate_patch``.

A run that started on the old code and is asleep when the new code is deployed must
replay the old path; a run that reaches the patched point on the new code takes the new
path and replays it ever after; once no old run is left, the old path's code can go."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from raftflow import Engine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    engine = Engine.from_url(f"sqlite:///{tmp_path / 'versions.db'}")
    yield engine
    engine.close()


def test_old_runs_keep_the_old_path_new_runs_take_the_new_one(engine: Engine) -> None:
    version = ["v1"]

    @engine.step
    def tax(amount: float, rounding: str) -> float:
        return round(amount * 0.2, 0 if rounding == "old" else 2)

    @engine.workflow
    def invoice(amount: float) -> list[Any]:
        if version[0] == "v1":
            result = [tax(amount, "old")]
        elif engine.patched("fix-tax-rounding"):
            result = [tax(amount, "new"), "patched"]
        else:
            result = [tax(amount, "old"), "old path"]
        engine.sleep(1.2)  # parks: the code may change before it wakes
        return result

    old = engine.start(invoice, 10.33)
    with engine.running_worker(sticky_cache=0):  # woken, each run replays the code of now
        while len(old.steps()) < 2:
            pass
        version[0] = "v2"  # deployed while the old run sleeps, past the patched point
        new = engine.start(invoice, 10.33)
        assert old.result(timeout=10) == [2.0, "old path"]
        assert new.result(timeout=10) == [2.07, "patched"]
    assert [s.kind for s in new.steps()] == ["patch", "step", "sleep"]
    assert [s.kind for s in old.steps()] == ["step", "sleep"]


def test_a_recorded_patch_replays_true_and_deprecate_steps_over_it(engine: Engine) -> None:
    stage = ["patched"]

    @engine.step
    def work(label: str) -> str:
        return label

    @engine.workflow
    def flow() -> list[str]:
        if stage[0] == "patched":
            first = "new" if engine.patched("p1") else "old"
        else:  # the old path is gone; runs that recorded the marker still replay
            engine.deprecate_patch("p1")
            first = "new"
        engine.sleep(1.2)
        return [first, work("after")]

    handle = engine.start(flow)
    with engine.running_worker(sticky_cache=0):
        while len(handle.steps()) < 2:
            pass
        stage[0] = "deprecated"
        assert handle.result(timeout=10) == ["new", "after"]
    fresh = engine.start(flow)
    with engine.running_worker():
        assert fresh.result(timeout=10) == ["new", "after"]
    assert [s.kind for s in fresh.steps()] == ["sleep", "step"]  # no marker any more
