"""Workflows for the operator tests (CLI, dashboard, metrics): quick ones, one that waits
for a signal (to cancel or to signal), one that fails after a retry, one with a child, one
under a concurrency limit (one at a time: a second one waits for the slot), one that
outlives its timeout and a nightly cron schedule. Worker processes import it:
``raftflow worker tests.apps.ops:engine --url ...``."""

from __future__ import annotations

import time
from datetime import datetime

from pydantic import BaseModel

from raftflow import Engine, Retry, current_step

engine = Engine()


class Order(BaseModel):
    id: str
    amount: float


@engine.step
def reserve(order_id: str) -> str:
    time.sleep(0.05)
    return f"rsv-{order_id}"


@engine.step
def charge(order_id: str, amount: float) -> str:
    time.sleep(0.05)
    return f"pay-{order_id}-{amount:.2f}"


@engine.step(retry=Retry(max_attempts=2, delay=0.05))
def call_bank(order_id: str) -> str:
    raise ConnectionError(f"the bank refused {order_id} (attempt {current_step().attempt})")


@engine.workflow
def checkout(order: Order) -> dict[str, str]:
    reservation = reserve(order.id)
    engine.set_event("progress", {"reserved": reservation})
    return {"reservation": reservation, "payment": charge(order.id, order.amount)}


@engine.workflow
def approval(order: Order) -> str:
    reserve(order.id)
    answer = engine.recv("review", timeout=600)
    return charge(order.id, order.amount) if answer and answer.get("ok") else "rejected"


@engine.workflow
def refund(order: Order) -> str:
    reserve(order.id)
    return call_bank(order.id)


@engine.workflow
def batch(orders: list[Order]) -> int:
    children = [engine.start(checkout, order) for order in orders]
    return sum(len(child.result()) for child in children)


@engine.workflow(concurrency=1)
def settle(order: Order) -> str:
    """One settlement at a time: holds its slot while it waits for a signal."""
    reserve(order.id)
    answer = engine.recv("settled", timeout=600)
    return "settled" if answer else "timed out"


@engine.workflow(timeout=1.0)
def deadline(order: Order) -> str:
    """Waits longer than its timeout allows: cancelled (reason "timeout")."""
    reserve(order.id)
    return "answered" if engine.recv("never", timeout=600) else "timed out"


@engine.scheduled("0 3 * * *")
@engine.workflow
def nightly(at: datetime) -> str:
    return reserve(f"nightly-{at:%Y%m%d}")
