"""The demo app: an order checkout as a durable workflow. Read it, copy it.

Run it with ``raftflow demo`` (a local SQLite file, one process) or
``raftflow demo --cluster`` (a local 3-node rqlite cluster and two worker processes,
each started as ``raftflow worker raftflow.engine.ops.demo:engine --url ...``).

It shows a step retried after a failure (``Retry``), a wait for a signal from outside
(the warehouse's approval, ``engine.recv``) and a durable sleep (``engine.sleep``): while
an execution waits it is parked in the queue, holding no worker.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence

from pydantic import BaseModel

from raftflow import Engine, Retry, WorkflowHandle, current_step

# No URL here: `raftflow worker raftflow.engine.ops.demo:engine --url ...` points it at a
# backend, and the default is a local SQLite file.
engine = Engine()


class Order(BaseModel):
    id: str
    items: list[str]
    amount: float


class Receipt(BaseModel):
    order_id: str
    reservation: str
    payment: str
    payment_attempts: int
    approved_by: str
    tracking: str
    workers: list[str]  # which process ran each step (the demo shows the spread)


def _worker() -> str:
    return f"pid {os.getpid()}"


@engine.step
def reserve_inventory(order_id: str, items: list[str]) -> dict[str, str]:
    # A real step would call an inventory service; its result is checkpointed, so a
    # replay after a crash reuses it instead of reserving twice.
    return {"id": f"rsv-{order_id}-{len(items)}", "by": _worker()}


@engine.step(retry=Retry(max_attempts=3, delay=0.2))
def charge_card(order_id: str, amount: float) -> dict[str, str]:
    # Steps run at least once: a worker can die after charging and before the result is
    # recorded. A stable key lets the payment provider deduplicate the retry (Stripe's
    # Idempotency-Key, for instance). The demo's provider times out on the first attempt
    # of every third order; the Retry runs it again 0.2 s later.
    step = current_step()
    if int(order_id.rsplit("-", 1)[1]) % 3 == 0 and step.attempt == 1:
        raise ConnectionError("payment provider timed out")
    key = hashlib.sha256(f"charge:{order_id}:{amount}".encode()).hexdigest()[:16]
    return {"id": f"pay-{key}", "by": _worker(), "attempt": str(step.attempt)}


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
    # Wait for the warehouse to approve the order: a signal sent with engine.send().
    approval = engine.recv("approval", timeout=60) or {"by": "nobody (timed out)"}
    # Hold the parcel a moment before it ships: a durable sleep, not a blocked thread.
    engine.sleep(1.5)
    shipment = create_shipment(order.id)
    mail = send_confirmation(order.id, shipment["id"])
    return Receipt(
        order_id=order.id,
        reservation=reservation["id"],
        payment=payment["id"],
        payment_attempts=int(payment["attempt"]),
        approved_by=approval["by"],
        tracking=shipment["id"],
        workers=[step["by"] for step in (reservation, payment, shipment, mail)],
    )


def orders(count: int) -> list[Order]:
    return [
        Order(id=f"order-{i:03d}", items=[f"sku-{i % 7}", f"sku-{i % 3}"], amount=10.0 + i)
        for i in range(count)
    ]


#: The calls of one checkout: its four steps, the recv of the approval and the sleep.
CALLS = 6


def start(order: Order) -> WorkflowHandle[Receipt]:
    """Start a checkout and approve it at once (the warehouse's signal)."""
    handle = engine.start(checkout, order)
    engine.send(handle.id, {"by": "warehouse"}, topic="approval")
    return handle


def run(count: int, *, timeout: float = 120.0) -> list[Receipt]:
    """Start ``count`` checkouts on ``engine``, approve each, wait and print the receipts
    (the workers run elsewhere: in this process or in others)."""
    started = time.perf_counter()
    handles = [start(order) for order in orders(count)]
    receipts = [handle.result(timeout=timeout) for handle in handles]
    _print(handles, receipts, time.perf_counter() - started)
    return receipts


def _print(
    handles: Sequence[WorkflowHandle[Receipt]], receipts: Sequence[Receipt], elapsed: float
) -> None:
    spread: dict[str, int] = {}
    for handle, receipt in zip(handles, receipts):
        calls = handle.steps()
        for worker in receipt.workers:
            spread[worker] = spread.get(worker, 0) + 1
        print(
            f"  {receipt.order_id}: {handle.status().value}, {len(calls)} calls "
            f"[{', '.join(c.name if c.kind == 'step' else c.kind for c in calls)}], "
            f"payment in {receipt.payment_attempts} attempt(s), approved by "
            f"{receipt.approved_by} -> {receipt.tracking} "
            f"(ran on {', '.join(sorted(set(receipt.workers)))})"
        )
    total = sum(spread.values())
    print(
        f"{len(receipts)} executions, {total} steps, all succeeded in {elapsed:.2f}s; "
        f"steps per worker: {dict(sorted(spread.items()))}"
    )
