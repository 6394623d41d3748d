"""Version 1 of an app, for the rolling-upgrade test (tests/integration/test_versions.py):
``order`` records a step, waits (a sleep or a signal) and records another.
tests/apps/upgrade_v2.py is the next release: one more step before the wait, so a
version-2 worker replaying a version-1 history would meet a different call."""

from __future__ import annotations

import os

from pydantic import BaseModel

from raftflow import Engine

engine = Engine()


class Order(BaseModel):
    n: int
    sleep: float = 0.0  # a sleep, else a wait for the "go" signal


@engine.step
def prepare(n: int) -> str:
    return f"prepared {n} in {os.getpid()}"


@engine.step
def ship(n: int) -> str:
    return f"shipped {n} in {os.getpid()}"


@engine.workflow
def order(spec: Order) -> list[str]:
    done = [prepare(spec.n)]
    if spec.sleep:
        engine.sleep(spec.sleep)
    else:
        engine.recv(topic="go", timeout=300)
    done.append(ship(spec.n))
    return done
