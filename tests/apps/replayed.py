"""One app in several versions, for the replay tests (``raftflow replay --app
tests.apps.replayed:<version>``). Each attribute is an Engine whose workflow ``order``
makes other calls than ``v1``'s, which records the histories:

=============  ======================================================  ===================
version        calls                                                   vs v1's history
=============  ======================================================  ===================
``v1``         reserve, charge, [sleep], ship                          --
``reworded``   as v1; ship's body returns another value                consistent
``renamed``    reserve, charge_card, [sleep], ship                     diverges at call 1
``inserted``   reserve, audit, charge, [sleep], ship                   diverges at call 1
``truncated``  reserve, charge, [sleep]                                ends where ship was
``extended``   reserve, charge, [sleep], ship, notify                  history ends first
=============  ======================================================  ===================

Every step body appends its name to the file ``order.log``: a replay must append nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from raftflow import Engine


class Order(BaseModel):
    id: str
    log: str  # the file each step body appends a line to
    nap: float = 0.0  # a durable sleep before the last step (0: none)


def _ran(order: Order, label: str) -> str:
    with open(order.log, "a") as log:
        log.write(f"{order.id} {label}\n")
    return label


def _step(engine: Engine, name: str, label: str) -> Callable[[Order], str]:
    """Step ``name`` of ``engine``, which logs ``label`` when its body runs."""

    def body(order: Order) -> str:
        return _ran(order, label)

    return engine.step(name=name)(body)


def make(version: str) -> Engine:
    """The app at ``version`` (see the module's table)."""
    engine = Engine()

    reserve, audit, charge, charge_card, notify = (
        _step(engine, name, name)
        for name in ("reserve", "audit", "charge", "charge_card", "notify")
    )
    ship = _step(engine, "ship", "shipped" if version == "reworded" else "ship")

    @engine.workflow(name="order")
    def order_flow(order: Order) -> list[str]:
        done = [reserve(order)]
        if version == "inserted":
            done.append(audit(order))
        done.append(charge_card(order) if version == "renamed" else charge(order))
        if order.nap:
            engine.sleep(order.nap)
        if version != "truncated":
            done.append(ship(order))
        if version == "extended":
            done.append(notify(order))
        return done

    return engine


v1 = make("v1")
reworded = make("reworded")
renamed = make("renamed")
inserted = make("inserted")
truncated = make("truncated")
extended = make("extended")
