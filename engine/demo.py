"""The demo app: an order checkout as a durable workflow. Read it, copy it.

Run it with ``raftflow demo`` (a local SQLite file, one process) or
``raftflow demo --cluster`` (a local 3-node rqlite cluster and two worker processes,
each started as ``raftflow worker raftflow.engine.demo:engine --url ...``).
"""

from __future__ import annotations

import hashlib
import os

from pydantic import BaseModel
from raftflow.engine import Engine

# No URL here: `raftflow worker raftflow.engine.demo:engine --url ...` points it at a backend,
# and the default is a local SQLite file.
engine = Engine()


class Order(BaseModel):
    id: str
    items: list[str]
    amount: float


class Receipt(BaseModel):
    order_id: str
    reservation: str
    payment: str
    tracking: str
    workers: list[str]  # which process ran each step (the demo shows the spread)


def _worker() -> str:
    return f"pid {os.getpid()}"


@engine.step
def reserve_inventory(order_id: str, items: list[str]) -> dict[str, str]:
    # A real step would call an inventory service; its result is checkpointed, so a
    # replay after a crash reuses it instead of reserving twice.
    return {"id": f"rsv-{order_id}-{len(items)}", "by": _worker()}


@engine.step
def charge_card(order_id: str, amount: float) -> dict[str, str]:
    # Steps run at least once: a worker can die after charging and before the result is
    # recorded. A stable key derived from the execution's data lets the payment
    # provider deduplicate the retry (Stripe's Idempotency-Key, for instance).
    key = hashlib.sha256(f"charge:{order_id}:{amount}".encode()).hexdigest()[:16]
    return {"id": f"pay-{key}", "by": _worker()}


@engine.step
def create_shipment(order_id: str) -> dict[str, str]:
    return {"id": f"trk-{order_id}", "by": _worker()}


@engine.step
def send_confirmation(order_id: str, tracking: str) -> dict[str, str]:
    return {"id": f"mail-{order_id}-{tracking}", "by": _worker()}


@engine.workflow
def checkout(order: Order) -> Receipt:
    # Plain Python between steps; it is replayed on recovery and sees the same values.
    reservation = reserve_inventory(order.id, order.items)
    payment = charge_card(order.id, order.amount)
    shipment = create_shipment(order.id)
    mail = send_confirmation(order.id, shipment["id"])
    return Receipt(
        order_id=order.id,
        reservation=reservation["id"],
        payment=payment["id"],
        tracking=shipment["id"],
        workers=[step["by"] for step in (reservation, payment, shipment, mail)],
    )


def orders(count: int) -> list[Order]:
    return [
        Order(id=f"order-{i:03d}", items=[f"sku-{i % 7}", f"sku-{i % 3}"], amount=10.0 + i)
        for i in range(count)
    ]
