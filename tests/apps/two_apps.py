"""Two apps on one cluster, for tests/integration/test_two_apps.py: disjoint workflows in
two engines, as two services of a team would deploy them. Worker processes import one:
``raftflow worker tests.apps.two_apps:orders --url ...`` (or ``:shipping``).

Each workflow sleeps, waits for a signal and records which process ran its step.
"""

from __future__ import annotations

import os

from raftflow import Engine

orders = Engine()
shipping = Engine()


@orders.step
def note(n: int) -> str:
    return f"orders:{os.getpid()}:{n}"


@orders.workflow
def approval(n: int) -> list[str]:
    first = note(n)
    orders.sleep(0.5)
    decision = orders.recv(topic="decision", timeout=60)
    return [first, str(decision)]


@shipping.step
def label(n: int) -> str:
    return f"shipping:{os.getpid()}:{n}"


@shipping.workflow(queue="shipping")
def dispatch(n: int) -> list[str]:
    first = label(n)
    shipping.sleep(0.5)
    decision = shipping.recv(topic="decision", timeout=60)
    return [first, str(decision)]
